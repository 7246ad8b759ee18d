"""Authorization as Pulsar's PulsarAuthorizationProvider: what an authenticated role may do.

``authorization_enabled`` off (or authentication off, so no role is known): everything is
allowed. On:

* ``super_user_roles`` may do anything: clusters, tenants, brokers, every namespace and topic;
* a tenant's ``adminRoles`` administer its namespaces and topics, and may produce and consume;
* other roles produce and consume where a namespace grant (``namespaces grant-permission``) or a
  topic grant (``topics grant-permission``) gives them the action; a lookup needs either action,
  listing a namespace's topics either one at the namespace level;
* a subscription the namespace keeps to some roles (``subscription_auth_roles``) is used only by
  them, even among roles that may consume.

A refusal is an AuthorizationError naming the role and the action.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from magnetar.broker.namespace import AuthPolicies, NamespacePolicies
from magnetar.broker.topic import TopicName

#: the actions a grant may hold (Pulsar's AuthAction)
ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")
_PARTITION = "-partition-"


class AuthorizationError(Exception):
    """The role may not do this (HTTP 403, Pulsar's AuthorizationError on the binary protocol)."""


class PolicySource(Protocol):
    async def tenant(self, tenant: str) -> dict[str, object]: ...

    async def policies(self, namespace: str) -> NamespacePolicies: ...


def check_actions(actions: Iterable[object]) -> list[str]:
    """The actions of a grant, each one of Pulsar's; ValueError naming one that is not."""
    found = []
    for action in actions:
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
        found.append(str(action))
    return sorted(set(found))


def topic_key(topic: TopicName) -> str:
    """Where a topic's grants are kept: a partition's are its partitioned topic's."""
    name = str(topic)
    return name.split(_PARTITION, 1)[0] if _PARTITION in topic.local else name


class Authorization:
    def __init__(self, *, enabled: bool, super_users: Iterable[str], policies: PolicySource) -> None:
        self.enabled = enabled
        self._super_users = frozenset(super_users)
        self._policies = policies

    def _free(self, role: str | None) -> bool:
        return not self.enabled or role is None or role in self._super_users

    def check_super_user(self, role: str | None, what: str) -> None:
        if not self._free(role):
            raise AuthorizationError(f"role {role} may not {what}: super-users only")

    async def is_tenant_admin(self, role: str | None, tenant: str) -> bool:
        if self._free(role):
            return True
        admins = (await self._policies.tenant(tenant)).get("adminRoles") or []
        return isinstance(admins, list) and role in admins

    async def check_tenant_admin(self, role: str | None, tenant: str, what: str) -> None:
        if not await self.is_tenant_admin(role, tenant):
            raise AuthorizationError(f"role {role} may not {what}: not an admin of tenant {tenant}")

    async def check_topic(
        self, role: str | None, topic: TopicName, *actions: str, subscription: str | None = None
    ) -> None:
        """Allowed when the role holds any of ``actions`` on the topic (or administers its tenant)
        and, for a ``subscription`` that lists the roles allowed to use it, is one of them."""
        if await self.is_tenant_admin(role, topic.tenant):
            return
        auth = (await self._policies.policies(topic.namespace_name)).auth_policies
        if subscription:
            allowed = auth.subscription_auth_roles.get(subscription)
            if allowed and role not in allowed:
                raise AuthorizationError(f"role {role} may not use subscription {subscription} on {topic}")
        if not _granted(auth, role, topic).intersection(actions):
            raise AuthorizationError(f"role {role} may not {' or '.join(actions)} on {topic}")

    async def check_namespace(self, role: str | None, namespace: str, *actions: str) -> None:
        """Allowed when a namespace-level grant gives the role any of ``actions``."""
        if await self.is_tenant_admin(role, namespace.split("/", 1)[0]):
            return
        auth = (await self._policies.policies(namespace)).auth_policies
        if not _granted(auth, role, None).intersection(actions):
            raise AuthorizationError(f"role {role} may not {' or '.join(actions)} in namespace {namespace}")


def _granted(auth: AuthPolicies, role: str | None, topic: TopicName | None) -> set[str]:
    granted = set(auth.namespace_auth.get(str(role), []))
    if topic is not None:
        granted |= set(auth.destination_auth.get(topic_key(topic), {}).get(str(role), []))
    return granted
