"""``MagnetarNamespace``: a tenant/namespace applied through its cluster's admin REST, idempotently
(an existing tenant or namespace is brought to the spec, not an error), and its bundles mirrored
into ``MagnetarBundle`` resources by a timer.

Deleting the resource follows ``deletionPolicy``: ``Retain`` (default) leaves the namespace in the
cluster; ``Delete`` removes it only when it holds no topics, so data is never dropped by a
``kubectl delete`` — a namespace with topics is retained and a Warning Event says so.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from magnetar.operator import conditions
from magnetar.operator.admin import AdminClient, AdminError, BundleInfo
from magnetar.operator.cluster_secrets import Keeper
from magnetar.operator.clusters import cluster_spec
from magnetar.operator.kube_api import Kube
from magnetar.operator.manifests import admin_url
from magnetar.operator.resources import API_VERSION, BUNDLES, CLUSTERS, NamespaceSpec, SpecError

NAMESPACE_LABEL = "magnetar.dev/namespace"


class Unresolved(Exception):
    """The namespace cannot be applied yet; ``reason`` names why (for conditions and Events)."""

    def __init__(self, reason: str, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry = retry


def parse(body: Any) -> NamespaceSpec:
    try:
        return NamespaceSpec.model_validate(dict(body.get("spec") or {}))
    except ValidationError as exc:
        raise SpecError("InvalidSpec", str(exc.errors()[0]["msg"])) from None


async def resolve(kube: Kube, body: Any, namespace: str, cluster: str) -> tuple[AdminClient, str]:
    """The admin client and the region of the MagnetarCluster ``cluster``."""
    obj = await kube.get_custom(CLUSTERS, namespace, cluster)
    if obj is None:
        raise Unresolved(
            "ClusterNotFound", f"MagnetarCluster {namespace}/{cluster} does not exist", retry=True
        )
    spec = cluster_spec(obj, cluster)
    if spec is None:
        raise Unresolved("ClusterInvalid", f"MagnetarCluster {cluster} has an invalid spec", retry=True)
    access = await Keeper(kube).admin_access(cluster, namespace, spec)
    return AdminClient(admin_url(spec, cluster, namespace), access=access), spec.region(cluster)


class NamespaceReconciler:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def apply(self, body: Any, namespace: str) -> dict[str, Any]:
        """Bring the namespace in the cluster to the spec; returns the status to write."""
        spec = parse(body)
        admin, region = await resolve(self.kube, body, namespace, spec.cluster)
        clusters = spec.clusters or [region]
        try:
            known = await admin.clusters()
        except AdminError as exc:
            raise Unresolved("Unreachable", str(exc), retry=True) from None
        unknown = sorted(set(clusters) - set(known))
        if unknown:
            raise Unresolved(
                "UnknownCluster",
                f"clusters {unknown} are not known to {spec.cluster} (known: {sorted(known)})",
                retry=True,
            )
        try:
            notes = await self._apply(admin, body, spec, clusters)
        except AdminError as exc:
            raise Unresolved("AdminError", str(exc), retry=exc.retriable) from None
        bundles = len(await admin.bundle_names(spec.full_name))
        message = f"{spec.full_name} in {', '.join(clusters)}" + (f"; {'; '.join(notes)}" if notes else "")
        return conditions.ready(body, "Applied", message) | {
            "namespace": spec.full_name,
            "clusters": clusters,
            "bundles": bundles,
        }

    async def _apply(
        self, admin: AdminClient, body: Any, spec: NamespaceSpec, clusters: list[str]
    ) -> list[str]:
        notes: list[str] = []
        if await admin.ensure_tenant(spec.tenant, clusters):
            kopf.event(body, type="Normal", reason="TenantCreated", message=f"Created tenant {spec.tenant}")
        if await admin.ensure_namespace(spec.full_name, spec.bundles, clusters):
            message = f"Created {spec.full_name} with {spec.bundles} bundle(s) in {clusters}"
            kopf.event(body, type="Normal", reason="NamespaceCreated", message=message)
        elif sorted(await admin.replication_clusters(spec.full_name)) != sorted(clusters):
            await admin.set_replication_clusters(spec.full_name, clusters)
            kopf.event(body, type="Normal", reason="ReplicationUpdated",
                       message=f"{spec.full_name} now replicates to {clusters}")  # fmt: skip
        if spec.retention_time_in_minutes is not None or spec.retention_size_in_mb is not None:
            try:
                await admin.set_retention(
                    spec.full_name, spec.retention_time_in_minutes or 0, spec.retention_size_in_mb or 0
                )
            except AdminError as exc:
                if exc.status not in (404, 405):
                    raise
                notes.append("retention not supported by this cluster's admin REST")
                kopf.event(body, type="Warning", reason="RetentionUnsupported", message=str(exc))
        return notes

    async def delete(self, body: Any, namespace: str) -> None:
        spec = parse(body)
        if spec.deletion_policy == "Retain":
            message = f"{spec.full_name} retained in the cluster (deletionPolicy Retain)"
            kopf.event(body, type="Normal", reason="Retained", message=message)
            return
        try:
            admin, _ = await resolve(self.kube, body, namespace, spec.cluster)
        except Unresolved as exc:
            kopf.event(body, type="Warning", reason=exc.reason, message=f"{exc}; nothing deleted")
            return
        if not await admin.namespace_exists(spec.full_name):
            return
        topics = await admin.topics(spec.full_name)
        if topics:
            message = f"{spec.full_name} holds {len(topics)} topic(s); retained, not deleted"
            kopf.event(body, type="Warning", reason="RetainedWithTopics", message=message)
            return
        await admin.delete_namespace(spec.full_name)
        kopf.event(body, type="Normal", reason="NamespaceDeleted", message=f"Deleted {spec.full_name}")

    # -- bundle mirror --------------------------------------------------------------------------
    async def mirror(self, body: Any, name: str, namespace: str) -> int:
        """Create, refresh and retire the MagnetarBundle resources of this namespace; returns how
        many bundles the cluster has."""
        spec = parse(body)
        admin, _ = await resolve(self.kube, body, namespace, spec.cluster)
        infos = await admin.bundles(spec.full_name)
        listed = await self.kube.list_custom(BUNDLES, namespace, f"{NAMESPACE_LABEL}={name}")
        existing = {b["spec"]["range"]: b for b in listed}
        for info in infos:
            cr_name = bundle_resource_name(name, info.name)
            if info.name not in existing:
                obj = {
                    "apiVersion": API_VERSION,
                    "kind": "MagnetarBundle",
                    "metadata": {"name": cr_name, "labels": {NAMESPACE_LABEL: name}},
                    "spec": {"cluster": spec.cluster, "namespace": spec.full_name, "range": info.name},
                }
                kopf.adopt(obj, owner=body)
                await self.kube.create_custom(BUNDLES, namespace, obj)
            previous = (existing.get(info.name) or {}).get("status") or {}
            await self.kube.patch_custom_status(BUNDLES, namespace, cr_name, bundle_status(info, previous))
        for gone in set(existing) - {i.name for i in infos}:
            # Split (or the namespace re-bundled): the range no longer exists in the cluster.
            await self.kube.delete_custom(BUNDLES, namespace, existing[gone]["metadata"]["name"])
            kopf.event(body, type="Normal", reason="BundleRetired", message=f"{gone} no longer exists")
        return len(infos)


def bundle_resource_name(namespace_resource: str, bundle: str) -> str:
    return f"{namespace_resource}-{bundle.replace('0x', '').replace('_', '-').lower()}"


def bundle_status(info: BundleInfo, previous: dict[str, Any]) -> dict[str, Any]:
    """The mirrored status; the publish rate is the counter's growth since the last pass (a
    counter that went down — topics reloaded elsewhere — restarts the rate at 0)."""
    now = datetime.now(UTC)
    rate = 0.0
    try:
        before = datetime.fromisoformat(str(previous["lastSynced"]).replace("Z", "+00:00"))
        grown = info.msg_in_counter - int(previous["msgInCounter"])
        elapsed = (now - before).total_seconds()
        rate = round(grown / elapsed, 3) if grown > 0 and elapsed > 0 else 0.0
    except (KeyError, ValueError, TypeError):
        pass
    return {
        "owner": info.owner,
        "state": "Owned" if info.owner else "Unowned",
        "topics": info.topics[:100],
        "topicCount": len(info.topics),
        "msgInCounter": info.msg_in_counter,
        "msgRateIn": rate,
        "lastSynced": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
