"""Ordered rolling restarts and scale-downs, one step at a time.

The operator never holds the plan in memory: each call looks at the world (pods, their config
hashes, the gates) and takes at most ONE action — delete one out-of-date pod, or lower one
StatefulSet's replicas by one — then reports what it waits for. So an operator that restarts
mid-roll resumes exactly where the cluster is, and repeats nothing: a pod already restarted
carries the new hash, a pod being restarted is simply waited for.

Order: storage before serving (ZooKeeper, bookies, brokers, read-only brokers); within a
component the highest ordinal first, as a StatefulSet does. Before a bookie goes, every bookie is
ready and no ledger is under-replicated; before a broker goes, its bundles are transferred. A
bookie a scale-down removed is decommissioned (gates.py) before the cluster is Ready again or the
next one goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from magnetar.operator.gates import ClusterRef, Drainer, ReplicationGate
from magnetar.operator.kube_api import Kube, failing, ordinal, pod_ready
from magnetar.operator.manifests import CONFIG_HASH, ROLL_ORDER, selector


@dataclass(frozen=True)
class Wait:
    """Not converged yet: why, for the Progressing condition; ``failing``: a pod fails rather than
    starts (the Degraded condition and a Warning Event, its reason the pod's)."""

    reason: str
    message: str
    failing: bool = False


@dataclass(frozen=True)
class Action:
    """What one step did, for an Event."""

    reason: str
    message: str


@dataclass(frozen=True)
class Step:
    wait: Wait | None = None
    action: Action | None = None


def _hash(obj: dict[str, Any]) -> str | None:
    annotations = obj.get("metadata", {}).get("annotations") or {}
    value = annotations.get(CONFIG_HASH)
    return str(value) if value is not None else None


class Roller:
    def __init__(self, kube: Kube, gate: ReplicationGate, drainer: Drainer) -> None:
        self.kube = kube
        self.gate = gate
        self.drainer = drainer

    async def step(self, cluster: ClusterRef, components: list[str]) -> Step:
        """One step towards every component being ready and current; ``Step()`` when done."""
        for component in ROLL_ORDER:
            if component not in components:
                continue
            step = await self._component(cluster, component)
            if step.wait is not None:
                return step
        return Step()

    async def _component(self, cluster: ClusterRef, component: str) -> Step:
        sts = await self.kube.statefulset(cluster.namespace, f"{cluster.name}-{component}")
        if sts is None:
            return Step(Wait("WaitingForStatefulSet", f"{component}: StatefulSet not created yet"))
        replicas = int(sts["spec"].get("replicas") or 0)
        want = _hash(sts["spec"]["template"])
        pods = await self.kube.pods(cluster.namespace, selector(cluster.name, component))
        members = [p for p in pods if ordinal(p) < replicas]
        ready = [p for p in members if pod_ready(p)]
        if len(ready) < replicas or len(pods) > replicas:
            missing = sorted(
                {f"{cluster.name}-{component}-{i}" for i in range(replicas)}
                - {p["metadata"]["name"] for p in ready}
            )
            extra = sorted(p["metadata"]["name"] for p in pods if ordinal(p) >= replicas)
            detail = (
                f"waiting for {', '.join(missing)}" if missing else f"waiting for {', '.join(extra)} to go"
            )
            summary = f"{component}: {len(ready)}/{replicas} ready"
            reasons, problems = failing(p for p in members if not pod_ready(p))
            if reasons:
                return Step(Wait(reasons[0], f"{summary}; {problems}", failing=True))
            return Step(Wait("WaitingForPods", f"{summary}; {detail}"))
        if component == "bookie":
            # Bookies a scale-down removed are decommissioned before anything else: their
            # ledgers re-replicated (the marks count as under-replicated until that is done).
            await self.gate.decommission(cluster, replicas)
            under = await self.gate.under_replicated(cluster)
            if under:
                return Step(Wait("WaitingForReplication", f"{under} ledger(s) under-replicated"))
        if component == "zookeeper":
            return Step()  # ZooKeeper rolls itself (RollingUpdate); only its readiness gates us
        outdated = sorted((p for p in members if _hash(p) != want), key=ordinal, reverse=True)
        if not outdated:
            return Step()
        pod = outdated[0]
        name = pod["metadata"]["name"]
        moved: list[str] = []
        if component.startswith("broker"):
            moved = await self.drainer.drain(cluster, pod)
        await self.kube.delete_pod(cluster.namespace, name)
        drained = f" after moving {len(moved)} bundle(s) away" if moved else ""
        left = len(outdated) - 1
        return Step(
            Wait("RollingRestart", f"restarting {name}; {left} more {component} pod(s) to restart"),
            Action("RestartingPod", f"Restarting {name} for the new configuration{drained}"),
        )

    async def scale_down_target(self, cluster: ClusterRef, component: str, desired: int) -> int:
        """The replicas to apply now: one fewer than running at most, and for bookies only once
        every bookie is ready and no ledger is under-replicated, so data is never left with too
        few copies. Scaling up applies at once."""
        sts = await self.kube.statefulset(cluster.namespace, f"{cluster.name}-{component}")
        if sts is None:
            return desired
        current = int(sts["spec"].get("replicas") or 0)
        if desired >= current:
            return desired
        pods = await self.kube.pods(cluster.namespace, selector(cluster.name, component))
        settled = len(pods) == current and all(pod_ready(p) for p in pods)
        if not settled or (component == "bookie" and await self.gate.under_replicated(cluster)):
            return current
        return current - 1
