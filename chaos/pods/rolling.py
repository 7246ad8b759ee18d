"""A rolling restart through the operator: a new ``restartedAt`` in the ``MagnetarCluster``'s
spec (for bookies or brokers), then the operator's own roll — one pod at a time, a bookie once
nothing is under-replicated, a broker after its bundles are transferred away — until its Ready
condition says Converged on that generation and every pod of the role carries the new template."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.chaos.pods.target import CLUSTERS, ClusterRef, KubeTarget
from magnetar.operator.kube_api import api_client
from magnetar.operator.manifests import COMPONENT, CONFIG_HASH, INSTANCE
from magnetar.operator.resources import GROUP, VERSION

#: the spec section of each role whose ``restartedAt`` rolls it
SECTIONS = {"bookie": "bookies", "broker": "brokers"}


def restart(directory: Path, role: str, region: str | None, timeout_s: float) -> dict[str, Any]:
    """Asks the operator to restart every pod of ``role`` in ``region`` (None: the first cluster)
    and waits until it has; the pods in the order it restarted them."""
    from kubernetes import client

    section = SECTIONS.get(role)
    if section is None:
        raise ActivityFailed(f"the operator rolls bookies and brokers, not {role!r}")
    target = KubeTarget.load(directory)
    api = api_client(target.kubeconfig)
    custom: Any = client.CustomObjectsApi(api)
    core: Any = client.CoreV1Api(api)
    apps: Any = client.AppsV1Api(api)
    ref = _cluster(custom, target, region)
    asked_at = datetime.now(UTC)
    asked = asked_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    patch = {"spec": {section: {"restartedAt": asked}}}
    changed = custom.patch_namespaced_custom_object(GROUP, VERSION, ref.namespace, CLUSTERS, ref.name, patch)
    generation = int(changed["metadata"]["generation"])
    started = time.monotonic()
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        cluster = custom.get_namespaced_custom_object(GROUP, VERSION, ref.namespace, CLUSTERS, ref.name)
        if _converged(cluster, generation) and _all_current(apps, core, ref, role):
            return {
                "cluster": f"{ref.name}@{ref.namespace}", "role": role, "restarted_at": asked,
                "generation": generation, "restarted": _restarted(core, ref, role, asked_at),
                "took_s": round(time.monotonic() - started, 3),
            }  # fmt: skip
        time.sleep(1)
    raise ActivityFailed(
        f"{ref.name}@{ref.namespace}: the operator did not finish restarting its {section} within "
        f"{timeout_s:.0f}s (generation {generation}); see `kubectl describe mgc {ref.name}`"
    )


def _cluster(custom: Any, target: KubeTarget, region: str | None) -> ClusterRef:
    if not target.clusters:
        raise ActivityFailed("the Kubernetes target names no MagnetarCluster")
    if region is None:
        return target.clusters[0]
    for ref in target.clusters:
        spec = custom.get_namespaced_custom_object(GROUP, VERSION, ref.namespace, CLUSTERS, ref.name)["spec"]
        if region in (ref.name, spec.get("clusterName")):
            return ref
    raise ActivityFailed(f"no MagnetarCluster of region {region!r} in the target")


def _converged(cluster: dict[str, Any], generation: int) -> bool:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    return (
        ready.get("status") == "True"
        and ready.get("reason") == "Converged"
        and int(ready.get("observedGeneration") or 0) >= generation
    )


def _all_current(apps: Any, core: Any, ref: ClusterRef, role: str) -> bool:
    """Every pod of the role (read-only brokers too) carries its StatefulSet's template."""
    sets = apps.list_namespaced_stateful_set(ref.namespace, label_selector=f"{INSTANCE}={ref.name}").items
    wanted = {s.metadata.name: s.spec.template.metadata.annotations.get(CONFIG_HASH) for s in sets}
    pods = _pods(core, ref, role)
    return bool(pods) and all(
        (p.metadata.annotations or {}).get(CONFIG_HASH) == wanted.get(p.metadata.owner_references[0].name)
        for p in pods
    )


def _pods(core: Any, ref: ClusterRef, role: str) -> list[Any]:
    found = core.list_namespaced_pod(ref.namespace, label_selector=f"{INSTANCE}={ref.name}").items
    return [p for p in found if p.metadata.labels.get(COMPONENT, "").startswith(role)]


def _restarted(core: Any, ref: ClusterRef, role: str, since: datetime) -> list[str]:
    """The pods of the role in the order the operator said it restarted them (its Events)."""
    events = core.list_namespaced_event(
        ref.namespace, field_selector=f"involvedObject.name={ref.name},reason=RestartingPod"
    ).items
    names = {p.metadata.name for p in _pods(core, ref, role)}
    after = since.replace(microsecond=0)  # Events carry whole seconds
    order = []
    for event in sorted(events, key=_when):
        pod = event.message.split()[1] if event.message else ""
        if pod in names and _when(event) >= after:
            order.append(pod)
    return order


def _when(event: Any) -> datetime:
    moment: datetime = event.last_timestamp or event.first_timestamp or event.metadata.creation_timestamp
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
