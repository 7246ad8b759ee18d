"""The admin REST calls the operator makes, in Pulsar's ``/admin/v2`` shapes: everything the
namespace and bundle handlers and the broker drain ask of a cluster, over the one admin client
(magnetar.admin.client). Being Pulsar's paths, the same calls work against Apache Pulsar.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from magnetar.admin.client import AdminError, AsyncAdminClient
from magnetar.operator.cluster_secrets import AdminAccess

__all__ = ["AdminClient", "AdminError", "BundleInfo"]


@dataclass(frozen=True)
class BundleInfo:
    name: str
    topics: list[str]
    owner: str | None
    #: messages published to the bundle's topics since they were loaded (summed msgInCounter)
    msg_in_counter: int = 0


class AdminClient(AsyncAdminClient):
    """``access``: the superuser token (from the cluster's Secret) and the CA to trust for https."""

    def __init__(self, base_url: str, *, timeout_s: float = 30.0, access: AdminAccess | None = None) -> None:
        access = access or AdminAccess()
        headers = {"X-Pulsar-ListenerName": access.listener} if access.listener else None
        super().__init__(
            base_url, timeout_s=timeout_s, credentials=access.credentials, tls=access.tls, headers=headers
        )

    # -- clusters, tenants, namespaces ----------------------------------------------------------
    async def clusters(self) -> list[str]:
        return list(await self.request("GET", "/admin/v2/clusters"))

    async def ensure_tenant(self, tenant: str, clusters: list[str]) -> bool:
        """Create ``tenant``; False when it already existed."""
        try:
            await self.request("PUT", f"/admin/v2/tenants/{_q(tenant)}", {"allowedClusters": clusters})
        except AdminError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def ensure_namespace(self, namespace: str, bundles: int, clusters: list[str]) -> bool:
        """Create ``tenant/namespace``; False when it already existed."""
        body = {"bundles": {"numBundles": bundles}, "replication_clusters": clusters}
        try:
            await self.request("PUT", f"/admin/v2/namespaces/{namespace}", body)
        except AdminError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def replication_clusters(self, namespace: str) -> list[str]:
        return list(await self.request("GET", f"/admin/v2/namespaces/{namespace}/replication"))

    async def set_replication_clusters(self, namespace: str, clusters: list[str]) -> None:
        await self.request("POST", f"/admin/v2/namespaces/{namespace}/replication", clusters)

    async def set_retention(self, namespace: str, minutes: int, size_mb: int) -> None:
        body = {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb}
        await self.request("POST", f"/admin/v2/namespaces/{namespace}/retention", body)

    async def delete_namespace(self, namespace: str) -> None:
        await self.request("DELETE", f"/admin/v2/namespaces/{namespace}")

    async def namespace_exists(self, namespace: str) -> bool:
        try:
            await self.request("GET", f"/admin/v2/namespaces/{namespace}")
        except AdminError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # -- topics and bundles ---------------------------------------------------------------------
    async def topics(self, namespace: str) -> list[str]:
        return list(await self.request("GET", f"/admin/v2/persistent/{namespace}"))

    async def bundle_names(self, namespace: str) -> list[str]:
        doc = await self.request("GET", f"/admin/v2/namespaces/{namespace}/bundles")
        bounds = list(doc["boundaries"])
        return [f"{lo}_{hi}" for lo, hi in itertools.pairwise(bounds)]

    async def bundles(self, namespace: str) -> list[BundleInfo]:
        """Every bundle with its topics, owner (the broker serving its first topic) and rates."""
        names = await self.bundle_names(namespace)
        members: dict[str, list[str]] = {n: [] for n in names}
        for topic in await self.topics(namespace):
            local = topic.rsplit("/", 1)[1]
            bundle = await self.request("GET", f"/admin/v2/persistent/{namespace}/{_q(local)}/bundle")
            members.setdefault(str(bundle), []).append(topic)
        result = []
        for name in names:
            topics = sorted(members[name])
            owner = await self._owner(namespace, topics[0]) if topics else None
            counted = sum([await self._msg_in(namespace, t) for t in topics])
            result.append(BundleInfo(name, topics, owner, counted))
        return result

    async def _owner(self, namespace: str, topic: str) -> str | None:
        local = topic.rsplit("/", 1)[1]
        try:
            doc = await self.request("GET", f"/lookup/v2/topic/persistent/{namespace}/{_q(local)}")
        except AdminError:
            return None
        url = str(doc.get("brokerUrl") or "")
        return url.split("://", 1)[-1] or None

    async def _msg_in(self, namespace: str, topic: str) -> int:
        local = topic.rsplit("/", 1)[1]
        try:
            stats = await self.request("GET", f"/admin/v2/persistent/{namespace}/{_q(local)}/stats")
        except AdminError:
            return 0  # a topic moving between brokers right now: counted on the next pass
        return int(stats.get("msgInCounter") or 0)

    async def unload(self, namespace: str, bundle: str, destination: str | None = None) -> Any:
        query = f"?destinationBroker={quote(destination)}" if destination else ""
        return await self.request("PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/unload{query}")

    async def split(self, namespace: str, bundle: str) -> Any:
        return await self.request("PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/split")

    async def brokers(self, cluster: str) -> list[str]:
        return list(await self.request("GET", f"/admin/v2/brokers/{cluster}"))


def _q(part: str) -> str:
    return quote(part, safe="")
