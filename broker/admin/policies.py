"""The admin REST API's topic policies, namespace level and topic level, in Pulsar's paths and
shapes: retention, message TTL, backlog quota, max producers / consumers, publish and dispatch
rates, delayed delivery, and the schema registry's strategy, auto update and validation. A GET
answers the level's own setting (null when not set), or with ``applied=true`` what applies
(topic over namespace over broker). Values out of range answer 412, wrong shapes 400."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from pydantic import ValidationError

from magnetar.broker.admin.http import DOMAIN, AdminDeps, namespace_of, topic_of
from magnetar.broker.namespace import NamespaceError
from magnetar.broker.policies.data import Policies, applied

Route = Callable[[web.Request], Awaitable[web.Response]]
_RANGE_ERRORS = {"greater_than_equal", "less_than_equal", "greater_than", "less_than", "literal_error"}
_QUOTA_TYPE = "destination_storage"


@dataclass(frozen=True)
class _Policy:
    field: str
    namespace_path: str
    topic_path: str


_POLICIES = [
    _Policy("retention", "retention", "retention"),
    _Policy("messageTTL", "messageTTL", "messageTTL"),
    _Policy("maxProducers", "maxProducersPerTopic", "maxProducers"),
    _Policy("maxConsumers", "maxConsumersPerTopic", "maxConsumers"),
    _Policy("publishRate", "publishRate", "publishRate"),
    _Policy("dispatchRate", "dispatchRate", "dispatchRate"),
    _Policy("backlogQuota", "backlogQuota", "backlogQuota"),
    _Policy("delayedDelivery", "delayedDelivery", "delayedDelivery"),
    _Policy("schemaCompatibilityStrategy", "schemaCompatibilityStrategy", "schemaCompatibilityStrategy"),
    _Policy("isAllowAutoUpdateSchema", "isAllowAutoUpdateSchema", "isAllowAutoUpdateSchema"),
    _Policy("schemaValidationEnforced", "schemaValidationEnforced", "schemaValidationEnforced"),
    _Policy("compactionThreshold", "compactionThreshold", "compactionThreshold"),
]
#: set with PUT as well as POST (Pulsar's admin clients PUT the namespace's strategy)
_PUT_TOO = {"schemaCompatibilityStrategy"}


def _checked(field: str, value: object) -> Policies:
    """``value`` as the setting ``field``; 412 out of range, 400 of the wrong shape."""
    try:
        return Policies.model_validate({field: value})
    except ValidationError as exc:
        status = 412 if all(e["type"] in _RANGE_ERRORS for e in exc.errors()) else 400
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise NamespaceError(f"invalid {field}: {detail}", status) from None


def _shown(field: str, policies: Policies) -> object:
    value = getattr(policies, field)
    if field == "backlogQuota":  # answered as Pulsar's backlogQuotaMap
        return {_QUOTA_TYPE: value.model_dump()} if value is not None else {}
    if field == "schemaCompatibilityStrategy" and value is None:
        return "UNDEFINED"
    return value.model_dump() if hasattr(value, "model_dump") else value


class PolicyAdminApi:
    def __init__(self, deps: AdminDeps) -> None:
        self._deps = deps

    def install(self, app: web.Application) -> None:
        r = app.router
        namespace = "/admin/v2/namespaces/{tenant}/{namespace}"
        topic = f"/admin/v2/{DOMAIN}/{{tenant}}/{{namespace}}/{{topic}}"
        for policy in _POLICIES:
            get = "backlogQuotaMap" if policy.field == "backlogQuota" else policy.namespace_path
            r.add_get(f"{namespace}/{get}", self._namespace_getter(policy))
            r.add_post(f"{namespace}/{policy.namespace_path}", self._namespace_setter(policy))
            if policy.field in _PUT_TOO:
                r.add_put(f"{namespace}/{policy.namespace_path}", self._namespace_setter(policy))
                r.add_put(f"{topic}/{policy.topic_path}", self._topic_setter(policy))
            r.add_delete(f"{namespace}/{policy.namespace_path}", self._namespace_remover(policy))
            get = "backlogQuotaMap" if policy.field == "backlogQuota" else policy.topic_path
            r.add_get(f"{topic}/{get}", self._topic_getter(policy))
            r.add_post(f"{topic}/{policy.topic_path}", self._topic_setter(policy))
            r.add_delete(f"{topic}/{policy.topic_path}", self._topic_remover(policy))

    # -- namespace level ------------------------------------------------------------------------
    def _namespace_getter(self, policy: _Policy) -> Route:
        async def get(request: web.Request) -> web.Response:
            own = (await self._deps.namespaces.policies(namespace_of(request))).topic_policies
            if request.query.get("applied", "false").lower() == "true":
                own = own.over(self._deps.policies.defaults)
            return web.json_response(_shown(policy.field, own))

        return get

    def _namespace_setter(self, policy: _Policy) -> Route:
        async def set_(request: web.Request) -> web.Response:
            value = await _value(request, policy)
            checked = _checked(policy.field, value)
            await self._deps.namespaces.set_topic_policy(
                namespace_of(request), policy.field, checked.model_dump()[policy.field]
            )
            return web.Response(status=204)

        return set_

    def _namespace_remover(self, policy: _Policy) -> Route:
        async def remove(request: web.Request) -> web.Response:
            await self._deps.namespaces.set_topic_policy(namespace_of(request), policy.field, None)
            return web.Response(status=204)

        return remove

    # -- topic level ----------------------------------------------------------------------------
    async def _existing(self, request: web.Request) -> tuple[str, int]:
        """The topic's name and partition count (0: not partitioned); 404 when it does not exist."""
        name = str(topic_of(request))
        partitions = await self._deps.partitioned.partitions(name)
        stored = await self._deps.topics.topics_of_namespace(namespace_of(request))
        if partitions == 0 and name not in stored and self._deps.topics.get(name) is None:
            raise NamespaceError(f"topic {name} does not exist", 404)
        return name, partitions

    async def _applied_here(self, name: str, partitions: int) -> None:
        """Apply a topic-level change at once to the topic (or its partitions) loaded here; other
        brokers apply it within topic_policies_check_interval_seconds."""
        names = [f"{name}-partition-{i}" for i in range(partitions)] if partitions else [name]
        for each in names:
            topic = self._deps.topics.get(each)
            if topic is not None:
                await self._deps.policies.refresh(topic)

    def _topic_getter(self, policy: _Policy) -> Route:
        async def get(request: web.Request) -> web.Response:
            name, _ = await self._existing(request)
            own = await self._deps.policies.store.get(name)
            if request.query.get("applied", "false").lower() == "true":
                namespace = await self._deps.namespaces.policies(namespace_of(request))
                own = applied(own, namespace.topic_policies, self._deps.policies.defaults)
            return web.json_response(_shown(policy.field, own))

        return get

    def _topic_setter(self, policy: _Policy) -> Route:
        async def set_(request: web.Request) -> web.Response:
            name, partitions = await self._existing(request)
            checked = _checked(policy.field, await _value(request, policy))
            await self._deps.policies.store.update(name, {policy.field: checked.model_dump()[policy.field]})
            await self._applied_here(name, partitions)
            return web.Response(status=204)

        return set_

    def _topic_remover(self, policy: _Policy) -> Route:
        async def remove(request: web.Request) -> web.Response:
            name, partitions = await self._existing(request)
            await self._deps.policies.store.update(name, {policy.field: None})
            await self._applied_here(name, partitions)
            return web.Response(status=204)

        return remove


async def _value(request: web.Request, policy: _Policy) -> object:
    """The value a set call carries: the JSON body, or Pulsar's query parameters where its admin
    clients use them (a topic's ``messageTTL``; the backlog quota's type)."""
    if policy.field == "messageTTL" and "messageTTL" in request.query:
        try:
            return int(request.query["messageTTL"])
        except ValueError:
            raise NamespaceError(
                f"messageTTL must be an integer, not {request.query['messageTTL']!r}", 412
            ) from None
    if policy.field == "backlogQuota":
        kind = request.query.get("backlogQuotaType", _QUOTA_TYPE)
        if kind != _QUOTA_TYPE:
            raise NamespaceError(
                f"backlog quotas of type {kind!r} are not supported (only {_QUOTA_TYPE})", 412
            )
    if not request.can_read_body:
        raise NamespaceError(f"{policy.field}: the value is missing", 400)
    return await request.json()
