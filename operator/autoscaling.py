"""Brokers scaled by load, between ``spec.brokers.autoscaling``'s ``min`` and ``max``.

With a ``CPU`` target the operator makes a HorizontalPodAutoscaler (manifests.broker_autoscaler)
and only mirrors what it decides into ``status.autoscaling``; a broker the HPA removes hands its
bundles over itself, as its graceful stop transfers every bundle it owns.

With a ``LoadManager`` target the operator scales the brokers' StatefulSet itself, on a timer, from
the figure Pulsar's load manager sheds by: each broker's load report
(``/admin/v2/broker-stats/load-report``), its highest weighted resource usage in percent. As an
HPA does, it recommends ``ceil(brokers * average / target)`` (no change within a tolerance of
10 %), bounded by min and max; a scale-up follows its recommendation at once, a scale-down the
highest recommendation of ``scaleDownStabilizationSeconds``. The recommendations live in
``status.autoscaling``, so an operator that restarts keeps its window.

- Scale-up: the new brokers join empty, and the brokers' own load manager moves nothing onto them
  under a modest load (its shedder moves bundles off a broker only above the cluster's average by
  a threshold and at 10 MB/s or more). So once they are ready and registered, the operator
  transfers bundles onto them from the brokers owning the most, until each owns its share, as the
  brokers' placement of a new bundle (the fewest bundles first) would have had it.
- Scale-down: one broker at a time, the highest ordinal; its bundles are transferred away
  (gates.Drainer, as before a restart) before the StatefulSet's replicas drop.

Each tick takes at most one step and acts only on a cluster whose reconcile is done (Ready for its
generation) and whose broker pods are all ready; the reconcile and the timer never act on one
cluster at the same time (:class:`ClusterLocks`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

import kopf

from magnetar.common.metadata import open_store
from magnetar.operator import conditions, configs
from magnetar.operator.admin import AdminClient, AdminError
from magnetar.operator.cluster_secrets import AdminAccess, Keeper
from magnetar.operator.gates import ClusterRef, Drainer, broker_id, ownership
from magnetar.operator.kube_api import Kube, ordinal, pod_ready
from magnetar.operator.manifests import selector
from magnetar.operator.resources import BrokerAutoscaling, SpecError
from magnetar.operator.validation import parse_cluster

log = logging.getLogger(__name__)

#: an HPA's: a ratio of average to target within 10 % of 1 changes nothing
TOLERANCE = 0.1
LOAD_REPORT = "/admin/v2/broker-stats/load-report"
#: the load report's resources and the broker settings weighing them (Pulsar's names)
WEIGHTS = {
    "cpu": "load_balancer_cpu_resource_weight",
    "memory": "load_balancer_memory_resource_weight",
    "bandwidth_in": "load_balancer_bandwidth_in_resource_weight",
    "bandwidth_out": "load_balancer_bandwidth_out_resource_weight",
}


class LoadReader(Protocol):
    async def utilization(self, cluster: ClusterRef, pods: list[dict[str, Any]]) -> dict[str, float]:
        """Each broker pod's utilization in percent, by pod name; one that did not answer is left out."""
        ...


class Spreader(Protocol):
    async def spread(
        self, cluster: ClusterRef, members: list[dict[str, Any]], joining: list[dict[str, Any]]
    ) -> list[str]:
        """Move bundles onto the brokers of ``joining`` (among ``members``, every broker pod) until
        each owns its share; the bundles moved. :class:`NotYet` while one is not registered."""
        ...


class NotYet(Exception):
    """A joining broker is not registered with the cluster yet: try again on the next tick."""


def broker_admin_url(cluster: ClusterRef, pod: dict[str, Any]) -> str:
    """The admin REST of the pod's own broker, at its stable DNS name (the internal listener)."""
    host = broker_id(cluster, pod).rsplit(":", 1)[0]
    if cluster.spec.tls.enabled:
        return f"https://{host}:{configs.BROKER_WEB_TLS_PORT}"
    return f"http://{host}:{configs.BROKER_WEB_PORT}"


def usage(report: dict[str, Any], config: dict[str, Any]) -> float:
    """A load report's highest weighted resource usage, in percent, as the shedder reads it."""
    return max(float(report.get(k) or 0.0) * float(config.get(w, 1.0)) for k, w in WEIGHTS.items())


class AdminLoadReader:
    """Reads each broker's latest load report from its own admin REST (``url_of`` a pod)."""

    def __init__(self, url_of: Callable[[ClusterRef, dict[str, Any]], str] = broker_admin_url) -> None:
        self.url_of = url_of

    async def utilization(self, cluster: ClusterRef, pods: list[dict[str, Any]]) -> dict[str, float]:
        async def one(pod: dict[str, Any]) -> tuple[str, float | None]:
            admin = AdminClient(self.url_of(cluster, pod), timeout_s=10.0, access=cluster.access)
            try:
                report = await admin.request("GET", LOAD_REPORT)
            except AdminError as exc:
                log.info("load report of %s: %s", pod["metadata"]["name"], exc)
                return pod["metadata"]["name"], None
            return pod["metadata"]["name"], usage(report or {}, cluster.spec.brokers.config)

        answers = await asyncio.gather(*(one(p) for p in pods))
        return {name: value for name, value in answers if value is not None}


class AdminSpreader:
    """Transfers bundles, found in the ownership records, onto new brokers through the admin REST."""

    async def spread(
        self, cluster: ClusterRef, members: list[dict[str, Any]], joining: list[dict[str, Any]]
    ) -> list[str]:
        admin = cluster.admin()
        registered = set(await admin.brokers(cluster.region))
        newcomers = [broker_id(cluster, p) for p in joining]
        missing = [b for b in newcomers if b not in registered]
        if missing:
            raise NotYet(f"{', '.join(missing)} not registered yet")
        store = await open_store(cluster.metadata_url)
        try:
            records = await ownership(store)
        finally:
            await store.close()
        serving = {broker_id(cluster, p) for p in members}
        owned = {b: list(records.get(b, [])) for b in serving}
        share = sum(len(v) for v in owned.values()) // max(len(owned), 1)
        moved = []
        for newcomer in newcomers:
            while len(owned[newcomer]) < share:
                sources = [b for b in owned if b not in newcomers]
                source = max(sources, key=lambda b: (len(owned[b]), b), default=None)
                if source is None or len(owned[source]) <= share:
                    break
                namespace, bundle = owned[source].pop()
                try:
                    await admin.unload(namespace, bundle, newcomer)
                except AdminError as exc:  # moved or gone meanwhile: the others still go
                    log.warning("moving %s of %s onto %s: %s", bundle, namespace, newcomer, exc)
                    continue
                owned[newcomer].append((namespace, bundle))
                moved.append(f"{namespace}/{bundle}")
        return moved


class ClusterLocks:
    """One lock per cluster, so the reconcile and the autoscaler never change one at once."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    @asynccontextmanager
    async def hold(self, namespace: str, name: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault((namespace, name), asyncio.Lock())
        async with lock:
            yield


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(at: datetime) -> str:
    # milliseconds: whole seconds would make a recommendation up to a second older than it is,
    # and the scale-down window that much shorter
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _age_s(stamp: str, now: datetime) -> float:
    return (now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds()


def recommend(current: int, average: float | None, scaling: BrokerAutoscaling) -> tuple[int, str]:
    """The brokers the figures call for, within min and max, and why."""
    target = scaling.target.average_utilization
    if average is None:
        wanted, why = current, "no load report answered"
    else:
        ratio = average / target
        wanted = current if abs(ratio - 1) <= TOLERANCE else math.ceil(current * ratio)
        why = f"average utilization {average:.0f}% against a target of {target}%"
    bounded = scaling.bound(wanted)
    if bounded > wanted:
        why += f"; at least autoscaling.min={scaling.min}"
    elif bounded < wanted:
        why += f"; at most autoscaling.max={scaling.max}"
    return bounded, why


def stabilized(
    current: int, recommendation: int, history: list[dict[str, Any]], scaling: BrokerAutoscaling
) -> int:
    """A scale-up at once; a scale-down to the highest recommendation of the window (``history``,
    the current one included), never above the brokers running."""
    if recommendation >= current:
        return recommendation
    return scaling.bound(min(current, max(int(r["brokers"]) for r in history)))


class Autoscaler:
    def __init__(
        self, kube: Kube, drainer: Drainer, reader: LoadReader, spreader: Spreader, locks: ClusterLocks
    ) -> None:
        self.kube = kube
        self.drainer = drainer
        self.reader = reader
        self.spreader = spreader
        self.locks = locks
        self.keeper = Keeper(kube)

    async def tick(self, body: Any, name: str, namespace: str) -> dict[str, Any] | None:
        """One look at a cluster: its ``status.autoscaling`` to write, None to leave it."""
        try:
            spec = parse_cluster(dict(body.get("spec") or {}), name)
        except SpecError:
            return None  # the reconcile reports it
        scaling = spec.brokers.autoscaling
        if spec.external is not None or scaling is None:
            return None
        if scaling.target.type == "CPU":
            return await self._mirror(namespace, name)
        status = body.get("status") or {}
        ready = conditions.find(status, "Ready") or {}
        done = status.get("observedGeneration") == body["metadata"].get("generation")
        if ready.get("status") != "True" or not done:
            return None  # a roll, an upgrade or a bad spec: the reconcile's turn
        async with self.locks.hold(namespace, name):
            access: AdminAccess = await self.keeper.admin_access(name, namespace, spec)
            return await self._step(body, ClusterRef(name, namespace, spec, access))

    async def _step(self, body: Any, cluster: ClusterRef) -> dict[str, Any] | None:
        scaling = cluster.spec.brokers.autoscaling
        assert scaling is not None
        sts = await self.kube.statefulset(cluster.namespace, f"{cluster.name}-broker")
        if sts is None:
            return None
        current = int(sts["spec"].get("replicas") or 0)
        pods = await self.kube.pods(cluster.namespace, selector(cluster.name, "broker"))
        members = sorted((p for p in pods if ordinal(p) < current), key=ordinal)
        ready = [p for p in members if pod_ready(p)]
        before = dict((body.get("status") or {}).get("autoscaling") or {})
        state = before | {"currentBrokers": len(ready)}
        state.setdefault("desiredBrokers", current)
        now = _now()
        window = scaling.scale_down_stabilization_seconds
        history = [r for r in before.get("recommendations") or [] if _age_s(r["at"], now) <= window]
        # while a step is under way, what it goes towards stands as the recommendation (an HPA
        # recommends at every sync): no scale-down follows a scale-up within the window
        waiting = state | {
            "recommendations": [*history, {"at": _stamp(now), "brokers": state["desiredBrokers"]}]
        }
        if len(ready) < current or len(pods) > current:
            return waiting  # brokers joining or leaving: the next step once they have
        joining = [p for p in ready if p["metadata"]["name"] in (before.get("joining") or [])]
        if joining:
            try:
                moved = await self.spreader.spread(cluster, ready, joining)
            except (NotYet, AdminError) as exc:
                log.info(
                    "%s/%s: bundles onto the new brokers later: %s", cluster.namespace, cluster.name, exc
                )
                return waiting
            names = ", ".join(p["metadata"]["name"] for p in joining)
            message = f"moved {len(moved)} bundle(s) onto {names}"
            _event(body, "Normal", "BundlesMoved", message.capitalize())
            return waiting | {
                "joining": None,
                "lastScaleReason": f"{before.get('lastScaleReason')}; {message}",
            }
        figures = await self.reader.utilization(cluster, ready)
        average = sum(figures.values()) / len(figures) if figures else None
        recommendation, why = recommend(current, average, scaling)
        history.append({"at": _stamp(now), "brokers": recommendation})
        desired = stabilized(current, recommendation, history, scaling)
        state |= {
            "averageUtilization": None if average is None else round(average, 1),
            "targetUtilization": scaling.target.average_utilization,
            "desiredBrokers": desired,
            "recommendations": history,
        }
        if desired > current:
            await self.kube.scale_statefulset(cluster.namespace, f"{cluster.name}-broker", desired)
            reason = f"{why}: {current} -> {desired} brokers"
            _event(body, "Normal", "ScaledUp", reason)
            joined = [f"{cluster.name}-broker-{i}" for i in range(current, desired)]
            return state | {"lastScaleTime": _stamp(now), "lastScaleReason": reason, "joining": joined}
        if desired < current:
            leaving = members[-1]
            moved = await self.drainer.drain(cluster, leaving)
            await self.kube.scale_statefulset(cluster.namespace, f"{cluster.name}-broker", current - 1)
            towards = f" (towards {desired})" if desired < current - 1 else ""
            reason = (
                f"{why} (over the last {window} s): {current} -> {current - 1} brokers{towards}; "
                f"{len(moved)} bundle(s) moved off {leaving['metadata']['name']} first"
            )
            _event(body, "Normal", "ScaledDown", reason)
            return state | {"lastScaleTime": _stamp(now), "lastScaleReason": reason}
        return state

    async def _mirror(self, namespace: str, name: str) -> dict[str, Any] | None:
        """What the HPA decided, in the cluster's own status."""
        hpa = await self.kube.autoscaler(namespace, f"{name}-broker")
        if hpa is None:
            return None
        status = hpa.get("status") or {}
        found = {c.get("type"): c for c in status.get("conditions") or []}
        said = (
            found.get("ScalingLimited")
            if (found.get("ScalingLimited") or {}).get("status") == "True"
            else None
        )
        said = said or found.get("ScalingActive") or found.get("AbleToScale") or {}
        utilization = next(
            (
                m["resource"]["current"].get("averageUtilization")
                for m in status.get("currentMetrics") or []
                if m.get("type") == "Resource"
            ),
            None,
        )
        return {
            "currentBrokers": status.get("currentReplicas"),
            "desiredBrokers": status.get("desiredReplicas"),
            "averageUtilization": utilization,
            "lastScaleTime": status.get("lastScaleTime"),
            "lastScaleReason": f"HorizontalPodAutoscaler {name}-broker: {said.get('message', 'no decision')}",
        }


def _event(body: Any, type_: str, reason: str, message: str) -> None:
    kopf.event(body, type=type_, reason=reason, message=message)
