"""The admin REST API's permissions, as Pulsar's: grants of actions (produce, consume, …) to
roles on a namespace (``namespaces grant-permission / revoke-permission / permissions``) and on
a topic (``topics grant-permission / …``), kept in the namespace's ``auth_policies``. A partitioned
topic's grants hold for its partitions. A subscription may be kept to some roles
(``namespaces grant-subscription-permission / revoke-subscription-permission``): only they, of
those that may consume, use it."""

from __future__ import annotations

from aiohttp import web

from magnetar.broker.admin.http import DOMAIN, AdminDeps, error, namespace_of, topic_of
from magnetar.broker.authorization import check_actions, topic_key
from magnetar.broker.namespace import AuthPolicies


class PermissionAdminApi:
    def __init__(self, deps: AdminDeps) -> None:
        self._namespaces = deps.namespaces

    def install(self, app: web.Application) -> None:
        r = app.router
        ns = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"
        topic = f"/admin/v2/{DOMAIN}/{{tenant}}/{{namespace}}/{{topic}}/permissions"
        r.add_get(ns, self.namespace_permissions)
        r.add_post(f"{ns}/{{role}}", self.grant_on_namespace)
        r.add_delete(f"{ns}/{{role}}", self.revoke_on_namespace)
        subscription = "/admin/v2/namespaces/{tenant}/{namespace}/permission/{subscription}"
        r.add_get(f"{ns}/subscription", self.subscription_permissions)
        r.add_post(subscription, self.grant_on_subscription)
        r.add_delete(f"{subscription}/{{role}}", self.revoke_on_subscription)
        r.add_get(topic, self.topic_permissions)
        r.add_post(f"{topic}/{{role}}", self.grant_on_topic)
        r.add_delete(f"{topic}/{{role}}", self.revoke_on_topic)

    async def namespace_permissions(self, request: web.Request) -> web.Response:
        policies = await self._namespaces.policies(namespace_of(request))
        return web.json_response(policies.auth_policies.namespace_auth)

    async def grant_on_namespace(self, request: web.Request) -> web.Response:
        actions = await _actions(request)
        if isinstance(actions, web.Response):
            return actions
        role = request.match_info["role"]
        await self._namespaces.edit_auth_policies(
            namespace_of(request), lambda auth: auth.namespace_auth.update({role: actions})
        )
        return web.Response(status=204)

    async def revoke_on_namespace(self, request: web.Request) -> web.Response:
        role = request.match_info["role"]
        await self._namespaces.edit_auth_policies(
            namespace_of(request), lambda auth: auth.namespace_auth.pop(role, None)
        )
        return web.Response(status=204)

    async def subscription_permissions(self, request: web.Request) -> web.Response:
        policies = await self._namespaces.policies(namespace_of(request))
        return web.json_response(policies.auth_policies.subscription_auth_roles)

    async def grant_on_subscription(self, request: web.Request) -> web.Response:
        """Pulsar's: the body's roles replace the subscription's."""
        roles = await request.json()
        if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
            return error(400, f'expected a list of roles, e.g. ["app"], not {roles!r}')
        name = request.match_info["subscription"]
        await self._namespaces.edit_auth_policies(
            namespace_of(request),
            lambda auth: auth.subscription_auth_roles.update({name: sorted(set(roles))}),
        )
        return web.Response(status=204)

    async def revoke_on_subscription(self, request: web.Request) -> web.Response:
        name, role = request.match_info["subscription"], request.match_info["role"]

        def revoke(auth: AuthPolicies) -> None:
            roles = auth.subscription_auth_roles.get(name, [])
            if role in roles:
                roles.remove(role)

        await self._namespaces.edit_auth_policies(namespace_of(request), revoke)
        return web.Response(status=204)

    async def topic_permissions(self, request: web.Request) -> web.Response:
        """The topic's grants with its namespace's (what a role may do there), as Pulsar's."""
        auth = (await self._namespaces.policies(namespace_of(request))).auth_policies
        merged = {role: list(actions) for role, actions in auth.namespace_auth.items()}
        for role, actions in auth.destination_auth.get(topic_key(topic_of(request)), {}).items():
            merged[role] = sorted(set(merged.get(role, [])) | set(actions))
        return web.json_response(merged)

    async def grant_on_topic(self, request: web.Request) -> web.Response:
        actions = await _actions(request)
        if isinstance(actions, web.Response):
            return actions
        key, role = topic_key(topic_of(request)), request.match_info["role"]
        await self._namespaces.edit_auth_policies(
            namespace_of(request),
            lambda auth: auth.destination_auth.setdefault(key, {}).update({role: actions}),
        )
        return web.Response(status=204)

    async def revoke_on_topic(self, request: web.Request) -> web.Response:
        key, role = topic_key(topic_of(request)), request.match_info["role"]
        await self._namespaces.edit_auth_policies(
            namespace_of(request), lambda auth: auth.destination_auth.get(key, {}).pop(role, None)
        )
        return web.Response(status=204)


async def _actions(request: web.Request) -> list[str] | web.Response:
    body = await request.json()
    if not isinstance(body, list):
        return error(400, f'expected a list of actions, e.g. ["produce", "consume"], not {body!r}')
    try:
        return check_actions(body)
    except ValueError as exc:
        return error(400, str(exc))
