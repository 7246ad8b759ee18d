"""Ordered rolling restarts and scale-downs, one step at a time.

The operator never holds the plan in memory: each call looks at the world (pods, their config
hashes, the gates) and takes at most ONE action — delete one out-of-date pod, or lower one
StatefulSet's replicas by one — then reports what it waits for. So an operator that restarts
mid-roll resumes exactly where the cluster is, and repeats nothing: a pod already restarted
carries the new hash, a pod being restarted is simply waited for.

Order: storage before serving (ZooKeeper, bookies, brokers, read-only brokers); within a
component the highest ordinal first, as a StatefulSet does. Before a bookie goes, every bookie is
ready and no ledger is under-replicated; before a broker goes (a restart, or a scale-down), its
bundles are transferred. A bookie a scale-down removed is decommissioned (gates.py) before the
cluster is Ready again or the next one goes. ZooKeeper's own StatefulSet controller restarts its
pods (RollingUpdate); the roll waits until each of them runs the current template and is ready.
Each step names the component it is at, which is the stage of an upgrade (clusters.py).

A pod of the current template that is not ready ``ready_deadline_s`` after it was made (an image
that crashes or never passes its probe) halts the roll there, as a Deployment's
``progressDeadlineSeconds`` does: nothing further is restarted, and the wait is a failing one (the
Degraded condition). A new spec moves it on: a pod that is not ready and not of the current
template serves nobody, so it is replaced at once, without the gates, whichever way the spec went
(the previous image back, or a fixed one); with ``OnDelete`` no StatefulSet controller would.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from magnetar.operator.gates import ClusterRef, Drainer, ReplicationGate
from magnetar.operator.kube_api import Kube, failing, ordinal, pod_ready
from magnetar.operator.manifests import CONFIG_HASH, ROLL_ORDER, selector

#: the reason of a roll halted by a pod that does not become ready (a Deployment's)
STALLED = "ProgressDeadlineExceeded"


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
    #: the component the roll is at (waits for, or acted on); None when every one is done
    component: str | None = None


#: how long a pod of the current template may take to become ready before the roll halts: a
#: Deployment's default ``progressDeadlineSeconds``
READY_DEADLINE_S = 600.0


def _hash(obj: dict[str, Any]) -> str | None:
    annotations = obj.get("metadata", {}).get("annotations") or {}
    value = annotations.get(CONFIG_HASH)
    return str(value) if value is not None else None


def _age_s(pod: dict[str, Any]) -> float:
    made = pod["metadata"].get("creationTimestamp")
    if not made:
        return 0.0
    return (datetime.now(UTC) - datetime.fromisoformat(made.replace("Z", "+00:00"))).total_seconds()


def _images(pod: dict[str, Any]) -> str:
    return ", ".join(c.get("image", "?") for c in pod.get("spec", {}).get("containers") or [])


class Roller:
    def __init__(
        self,
        kube: Kube,
        gate: ReplicationGate,
        drainer: Drainer,
        *,
        ready_deadline_s: float = READY_DEADLINE_S,
    ) -> None:
        self.kube = kube
        self.gate = gate
        self.drainer = drainer
        self.ready_deadline_s = ready_deadline_s

    async def step(self, cluster: ClusterRef, components: list[str]) -> Step:
        """One step towards every component being ready and current; ``Step()`` when done."""
        for component in ROLL_ORDER:
            if component not in components:
                continue
            step = await self._component(cluster, component)
            if step.wait is not None:
                return Step(step.wait, step.action, component)
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
            replaced = await self._replace_stale(cluster, component, members, want)
            if replaced is not None:
                return replaced
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
            late = [
                p
                for p in members
                if not pod_ready(p) and _hash(p) == want and _age_s(p) > self.ready_deadline_s
            ]
            if late:
                names = ", ".join(f"{p['metadata']['name']} (image {_images(p)})" for p in late)
                message = (
                    f"{summary}; {names} not ready {self.ready_deadline_s:g} s after it was made: "
                    "the roll halts here until it is ready or the spec changes "
                    "(the previous image back, or a fixed one)"
                )
                return Step(Wait(STALLED, message, failing=True))
            return Step(Wait("WaitingForPods", f"{summary}; {detail}"))
        if component == "bookie":
            # Bookies a scale-down removed are decommissioned before anything else: their
            # ledgers re-replicated (the marks count as under-replicated until that is done).
            await self.gate.decommission(cluster, replicas)
            under = await self.gate.under_replicated(cluster)
            if under:
                return Step(Wait("WaitingForReplication", f"{under} ledger(s) under-replicated"))
        outdated = sorted((p for p in members if _hash(p) != want), key=ordinal, reverse=True)
        if not outdated:
            return Step()
        if component == "zookeeper":
            # ZooKeeper rolls itself (RollingUpdate): the next stage waits until that is done
            names = ", ".join(p["metadata"]["name"] for p in outdated)
            return Step(Wait("RollingRestart", f"zookeeper: its StatefulSet restarts {names}"))
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

    async def _replace_stale(
        self, cluster: ClusterRef, component: str, members: list[dict[str, Any]], want: str | None
    ) -> Step | None:
        """Delete the highest not-ready member of an older template (a pod of the image a new
        spec replaced), so that it is made again from the current one; None when there is none.
        ZooKeeper's too: a RollingUpdate StatefulSet waits for a broken pod forever, and
        Kubernetes' own advice after reverting its template is to delete such pods."""
        stale = sorted(
            (
                p
                for p in members
                if not pod_ready(p) and not p["metadata"].get("deletionTimestamp") and _hash(p) != want
            ),
            key=ordinal,
            reverse=True,
        )
        if not stale:
            return None
        name = stale[0]["metadata"]["name"]
        await self.kube.delete_pod(cluster.namespace, name)
        return Step(
            Wait("RollingRestart", f"replacing {name}, not ready and of an older template"),
            Action("ReplacingPod", f"Replacing {name}: not ready and of an older template"),
        )

    async def scale_down_target(self, cluster: ClusterRef, component: str, desired: int) -> int:
        """The replicas to apply now: one fewer than running at most, and for bookies only once
        every bookie is ready and no ledger is under-replicated, so data is never left with too
        few copies; a leaving broker's bundles are transferred away first. Scaling up applies at
        once."""
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
        if component.startswith("broker"):
            await self.drainer.drain(cluster, max(pods, key=ordinal))
        return current - 1
