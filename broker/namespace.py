"""Tenants, namespaces, their policies and bundles (architecture §5), in the configuration store.

    /admin/clusters/<cluster>                 JSON {serviceUrl, brokerServiceUrl, [serviceUrlTls,
                                              brokerServiceUrlTls, listenerName]}
    /admin/policies/<tenant>                  JSON {allowedClusters, adminRoles}
    /admin/policies/<tenant>/<namespace>      JSON namespace policies (below)

A namespace's 32-bit hash space is cut into bundles by sorted boundaries (default 4 equal
bundles, Pulsar's defaultNumberOfNamespaceBundles). A topic belongs to the bundle containing
``crc32(topic name)`` (the full ``persistent://tenant/ns/topic`` name, UTF-8): Magnetar's
documented hash; Pulsar uses Murmur3 for the same purpose, and no client depends on it.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import re
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from magnetar.broker.policies.data import AutoTopicCreationOverride, Policies
from magnetar.common.metadata import BadVersionError, MetadataStore, NodeExistsError, NoNodeError
from magnetar.common.metadata.cache import ReadCache

FULL_RANGE = 0x1_0000_0000
DEFAULT_BUNDLES = 4


class NamespaceError(Exception):
    """Unknown or invalid tenant/namespace/bundle; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 404) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, order=True)
class Bundle:
    start: int
    end: int  # exclusive; FULL_RANGE for the last bundle

    @property
    def name(self) -> str:
        """Pulsar's bundle name: ``0x00000000_0x40000000`` (the last ends at 0xffffffff)."""
        return f"0x{self.start:08x}_0x{min(self.end, 0xFFFFFFFF):08x}"

    @classmethod
    def parse(cls, name: str) -> Bundle:
        try:
            start_text, end_text = name.split("_")
            start, end = int(start_text, 16), int(end_text, 16)
        except ValueError:
            raise NamespaceError(f"invalid bundle {name!r}: expected 0x00000000_0x40000000", 412) from None
        return cls(start, FULL_RANGE if end == 0xFFFFFFFF else end)

    def contains(self, hash_value: int) -> bool:
        return self.start <= hash_value < self.end

    def halves(self) -> tuple[Bundle, Bundle]:
        """Pulsar's range-equally-divide split."""
        middle = (self.start + self.end) // 2
        return Bundle(self.start, middle), Bundle(middle, self.end)


#: the namespace's side of a split (``Namespaces.split``): the new boundary written, the halves
SplitCommit = Callable[[str, Bundle], Awaitable[tuple[Bundle, Bundle]]]


def topic_hash(topic: str) -> int:
    return zlib.crc32(topic.encode()) & 0xFFFFFFFF


def even_boundaries(count: int) -> list[int]:
    return [FULL_RANGE * i // count for i in range(count)] + [FULL_RANGE]


class AuthPolicies(BaseModel):
    """Pulsar's auth_policies: actions granted per role on the namespace, and per topic; the roles
    that alone may consume from a subscription (none listed: any role that may consume)."""

    model_config = ConfigDict(extra="ignore")

    namespace_auth: dict[str, list[str]] = Field(default_factory=dict)
    destination_auth: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    subscription_auth_roles: dict[str, list[str]] = Field(default_factory=dict)


class NamespacePolicies(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    replication_clusters: list[str] = Field(default_factory=list)
    #: bundle boundaries, first 0, last 2**32
    boundaries: list[int] = Field(default_factory=lambda: even_boundaries(DEFAULT_BUNDLES))
    #: namespace-level topic policies (retention, TTL, backlog quota, limits, rates)
    topic_policies: Policies = Field(default_factory=Policies)
    #: Pulsar's autoTopicCreationOverride (None: the broker's allow_auto_topic_creation settings)
    auto_topic_creation: AutoTopicCreationOverride | None = None
    deduplication_enabled: bool | None = None
    replicate_subscription_state: bool = False
    #: PIP-33 snapshot frequency of the namespace's topics (default: the broker's
    #: replicated_subscriptions_snapshot_frequency_millis); at least 50 ms
    replicated_subscriptions_snapshot_frequency_millis: int | None = Field(default=None, ge=50)
    #: beyond PIP-33 (a) for the namespace's topics (default: the broker's
    #: replicated_subscriptions_carry_individual_acks)
    replicated_subscriptions_carry_acks: bool | None = None
    #: who may produce and consume (namespace grants, topic grants), as Pulsar's auth_policies
    auth_policies: AuthPolicies = Field(default_factory=AuthPolicies)

    def bundles(self) -> list[Bundle]:
        return [Bundle(a, b) for a, b in zip(self.boundaries, self.boundaries[1:], strict=False)]

    def bundle_for(self, topic: str) -> Bundle:
        """The bundle whose range holds the topic's hash (a binary search of the boundaries)."""
        index = bisect.bisect_right(self.boundaries, topic_hash(topic)) - 1
        return Bundle(self.boundaries[index], self.boundaries[index + 1])


#: Pulsar's names of clusters, tenants and namespaces (NamedEntity.checkName)
_NAME = re.compile(r"[-=:.\w]+", re.ASCII)


def check_name(kind: str, name: str) -> str:
    """``name`` when it is a valid ``kind`` name; a 412 NamespaceError saying why otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 255:
        raise NamespaceError(
            f"invalid {kind} name {name!r}: 1 to 255 of the letters, digits and -=:._ only", 412
        )
    return name


def _split_name(namespace: str) -> tuple[str, str]:
    parts = namespace.split("/")
    if len(parts) != 2 or not all(parts):
        raise NamespaceError(f"invalid namespace {namespace!r}: expected tenant/namespace", 412)
    return parts[0], parts[1]


class Namespaces:
    """Clusters, tenants and namespace policies in the configuration store."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        #: namespace policies, read on every lookup and topic load: kept until they change
        self._policies = ReadCache(store)
        #: each namespace's policies as last parsed, with the bytes they were parsed from
        self._parsed: dict[str, tuple[bytes, NamespacePolicies]] = {}

    # -- clusters -------------------------------------------------------------------------------
    async def set_cluster(
        self,
        name: str,
        service_url: str,
        broker_service_url: str,
        listener_name: str = "",
        *,
        service_url_tls: str = "",
        broker_service_url_tls: str = "",
    ) -> None:
        """Pulsar's ClusterData; the TLS URLs (https://, pulsar+ssl://) are kept only when given,
        so records written before them read the same."""
        check_name("cluster", name)
        doc = {"serviceUrl": service_url, "brokerServiceUrl": broker_service_url}
        if service_url_tls:
            doc["serviceUrlTls"] = service_url_tls
        if broker_service_url_tls:
            doc["brokerServiceUrlTls"] = broker_service_url_tls
        if listener_name:
            doc["listenerName"] = listener_name
        await self._store.put(f"/admin/clusters/{name}", json.dumps(doc).encode())

    async def clusters(self) -> list[str]:
        try:
            return await self._store.children("/admin/clusters")
        except NoNodeError:
            return []

    async def cluster(self, name: str) -> dict[str, str]:
        try:
            return dict(json.loads((await self._store.get(f"/admin/clusters/{name}"))[0]))
        except NoNodeError:
            raise NamespaceError(f"cluster {name} does not exist") from None

    # -- tenants --------------------------------------------------------------------------------
    async def create_tenant(
        self,
        tenant: str,
        allowed_clusters: list[str],
        *,
        exist_ok: bool = False,
        admin_roles: list[str] | None = None,
    ) -> None:
        check_name("tenant", tenant)
        doc = {"allowedClusters": allowed_clusters, "adminRoles": admin_roles or []}
        try:
            await self._store.create(f"/admin/policies/{tenant}", json.dumps(doc).encode())
        except NodeExistsError:
            if not exist_ok:
                raise NamespaceError(f"tenant {tenant} already exists", 409) from None

    async def update_tenant(
        self, tenant: str, allowed_clusters: list[str], admin_roles: list[str] | None = None
    ) -> None:
        known = await self.tenant(tenant)  # 404 for one that does not exist
        roles = admin_roles if admin_roles is not None else known.get("adminRoles", [])
        doc = {"allowedClusters": allowed_clusters, "adminRoles": roles}
        await self._store.put(f"/admin/policies/{tenant}", json.dumps(doc).encode())

    async def tenants(self) -> list[str]:
        try:
            return await self._store.children("/admin/policies")
        except NoNodeError:
            return []

    async def tenant(self, tenant: str) -> dict[str, object]:
        try:
            return dict(json.loads((await self._store.get(f"/admin/policies/{tenant}"))[0]))
        except NoNodeError:
            raise NamespaceError(f"tenant {tenant} does not exist") from None

    # -- namespaces -----------------------------------------------------------------------------
    async def create(
        self, namespace: str, policies: NamespacePolicies | None = None, *, exist_ok: bool = False
    ) -> None:
        tenant, local = _split_name(namespace)
        check_name("namespace", local)
        await self.tenant(tenant)
        data = (policies or NamespacePolicies()).model_dump_json().encode()
        try:
            await self._store.create(f"/admin/policies/{namespace}", data)
        except NodeExistsError:
            if not exist_ok:
                raise NamespaceError(f"namespace {namespace} already exists", 409) from None
        finally:
            self._policies.drop(f"/admin/policies/{namespace}")

    async def namespaces(self, tenant: str) -> list[str]:
        await self.tenant(tenant)
        return [f"{tenant}/{n}" for n in await self._store.children(f"/admin/policies/{tenant}")]

    async def policies(self, namespace: str) -> NamespacePolicies:
        """The namespace's policies, shared by every caller until they change: read them, never
        modify them (a change goes through ``update`` and its siblings)."""
        _split_name(namespace)
        try:
            data = await self._policies.get(f"/admin/policies/{namespace}")
        except NoNodeError:
            self._parsed.pop(namespace, None)
            raise NamespaceError(f"namespace {namespace} does not exist") from None
        parsed = self._parsed.get(namespace)
        if parsed is None or parsed[0] != data:
            # Parsed once per change, not once per lookup and topic load of its many topics.
            parsed = self._parsed[namespace] = (data, NamespacePolicies.model_validate_json(data))
        return parsed[1]

    async def update(self, namespace: str, change: dict[str, object]) -> NamespacePolicies:
        """Apply ``change`` to the policies by compare-and-set (concurrent admins both land)."""
        return await self._modify(namespace, lambda _doc: change)

    async def set_topic_policy(self, namespace: str, name: str, value: object) -> NamespacePolicies:
        """Set one of the namespace's topic policies (None: not set), by compare-and-set."""
        return await self._modify(
            namespace, lambda doc: {"topic_policies": {**doc.get("topic_policies", {}), name: value}}
        )

    async def edit_auth_policies(
        self, namespace: str, edit: Callable[[AuthPolicies], object]
    ) -> NamespacePolicies:
        """Grant or revoke (``edit`` changes the auth policies in place), by compare-and-set."""

        def change(doc: dict[str, Any]) -> dict[str, object]:
            auth = AuthPolicies.model_validate(doc.get("auth_policies") or {})
            edit(auth)
            return {"auth_policies": auth.model_dump()}

        return await self._modify(namespace, change)

    async def _modify(
        self, namespace: str, change: Callable[[dict[str, Any]], dict[str, object]]
    ) -> NamespacePolicies:
        while True:
            try:
                data, stat = await self._store.get(f"/admin/policies/{namespace}")
            except NoNodeError:
                raise NamespaceError(f"namespace {namespace} does not exist") from None
            doc = json.loads(data)
            updated = NamespacePolicies.model_validate({**doc, **change(doc)})
            try:
                await self._store.put(
                    f"/admin/policies/{namespace}",
                    updated.model_dump_json().encode(),
                    expected_version=stat.version,
                )
                return updated
            except BadVersionError:
                continue
            finally:
                self._policies.drop(f"/admin/policies/{namespace}")

    async def delete(self, namespace: str) -> None:
        try:
            await self._store.delete(f"/admin/policies/{namespace}")
        except NoNodeError:
            raise NamespaceError(f"namespace {namespace} does not exist") from None
        finally:
            self._policies.drop(f"/admin/policies/{namespace}")

    async def delete_tenant(self, tenant: str) -> None:
        """Pulsar's rule: a tenant that still has namespaces is not deleted."""
        await self.tenant(tenant)  # 404 for one that does not exist
        held = await self.namespaces(tenant)
        if held:
            raise NamespaceError(f"cannot delete tenant {tenant}: it has namespaces {held}", 409)
        with contextlib.suppress(NoNodeError):
            await self._store.delete(f"/admin/policies/{tenant}")

    async def split(self, namespace: str, bundle: Bundle) -> tuple[Bundle, Bundle]:
        """Split ``bundle`` in the middle of its range."""
        policies = await self.policies(namespace)
        if bundle not in policies.bundles():
            raise NamespaceError(f"bundle {bundle.name} is not a bundle of {namespace}")
        low, high = bundle.halves()
        await self.update(namespace, {"boundaries": sorted({*policies.boundaries, low.end})})
        return low, high
