"""Reconciling a ``MagnetarCluster``: check the spec, apply the objects it becomes (owned by it),
then restart or scale its pods in order, one step per call, until every pod is ready and current.

A spec that cannot work (Qa > Qw > E broken, too few bookies, an unknown setting) sets the
``Degraded`` condition and a Warning Event and stops there: nothing is retried until the spec
changes, so a bad resource never becomes a crash loop.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import kopf

from magnetar.operator import conditions
from magnetar.operator.admin import AdminError
from magnetar.operator.gates import ClusterRef
from magnetar.operator.kube import Kube
from magnetar.operator.manifests import admin_url, render_cluster
from magnetar.operator.resources import ClusterSpec, SpecError, parse_cluster
from magnetar.operator.rollout import Roller

CONVERGED = "Converged"


@dataclass
class Outcome:
    """What a reconcile call leaves: the status to write, and whether to come back later."""

    status: dict[str, Any]
    retry_in: float | None = None
    retry_message: str = ""


class ClusterReconciler:
    def __init__(self, kube: Kube, roller: Roller, *, poll_s: float = 2.0) -> None:
        self.kube = kube
        self.roller = roller
        self.poll_s = poll_s

    async def reconcile(self, body: Any, name: str, namespace: str) -> Outcome:
        try:
            spec = parse_cluster(dict(body.get("spec") or {}), name)
        except SpecError as exc:
            _event(body, "Warning", exc.reason, str(exc))
            return Outcome(conditions.degraded(body, exc.reason, str(exc)))
        cluster = ClusterRef(name, namespace, spec)
        info = {"region": spec.region(name), "adminUrl": admin_url(spec, name, namespace)}
        if spec.external is not None:
            return await self._external(body, cluster, info)
        return await self._managed(body, cluster, info)

    async def _external(self, body: Any, cluster: ClusterRef, info: dict[str, Any]) -> Outcome:
        assert cluster.spec.external is not None
        info["serviceUrl"] = cluster.spec.external.service_url
        try:
            regions = await cluster.admin().clusters()
        except AdminError as exc:
            status = conditions.degraded(body, "Unreachable", str(exc)) | info
            return Outcome(status, retry_in=max(self.poll_s, 10.0), retry_message=str(exc))
        message = f"external cluster; regions known to it: {', '.join(regions) or 'none'}"
        return Outcome(conditions.ready(body, "External", message) | info)

    async def _managed(self, body: Any, cluster: ClusterRef, info: dict[str, Any]) -> Outcome:
        spec = cluster.spec
        info["serviceUrl"] = f"pulsar://{cluster.name}-broker.{cluster.namespace}.svc:6650"
        info["metadataStore"] = cluster.metadata_url
        objs = render_cluster(spec, cluster.name, cluster.namespace)
        targets = {"bookie": spec.bookies.replicas}
        for obj in objs:
            component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
            if obj["kind"] == "StatefulSet" and component in targets:
                wanted = targets[component]
                obj["spec"]["replicas"] = await self.roller.scale_down_target(cluster, component, wanted)
        kopf.adopt(objs, owner=body)
        digest = _digest(objs)
        for obj in objs:
            await self.kube.apply(obj, cluster.namespace)
        if (body.get("status") or {}).get("appliedHash") != digest:
            kinds = sorted({o["kind"] for o in objs})
            _event(body, "Normal", "Applied", f"Applied {len(objs)} objects ({', '.join(kinds)})")
        info["appliedHash"] = digest
        components = ["bookie", "broker"]
        if not spec.metadata_store.url:
            components.insert(0, "zookeeper")
        if spec.brokers.read_only_replicas:
            components.append("broker-readonly")
        step = await self.roller.step(cluster, components)
        if step.action is not None:
            _event(body, "Normal", step.action.reason, step.action.message)
        if step.wait is not None:
            status = conditions.progressing(body, step.wait.reason, step.wait.message) | info
            return Outcome(status, retry_in=self.poll_s, retry_message=step.wait.message)
        pending = [
            c
            for c, want in targets.items()
            if (await self.kube.statefulset(cluster.namespace, f"{cluster.name}-{c}") or {})
            .get("spec", {})
            .get("replicas")
            != want
        ]
        if pending:
            message = f"scaling {', '.join(pending)} one pod at a time"
            status = conditions.progressing(body, "Scaling", message) | info
            return Outcome(status, retry_in=self.poll_s, retry_message=message)
        message = f"{spec.bookies.replicas} bookie(s), {spec.brokers.replicas} broker(s) ready and current"
        was_ready = conditions.find(body.get("status"), "Ready")
        if not was_ready or was_ready.get("status") != "True" or was_ready.get("reason") != CONVERGED:
            _event(body, "Normal", CONVERGED, message)
        return Outcome(conditions.ready(body, CONVERGED, message) | info)


def _digest(objs: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(objs, sort_keys=True).encode()).hexdigest()[:16]


def _event(body: Any, type_: str, reason: str, message: str) -> None:
    kopf.event(body, type=type_, reason=reason, message=message)


def cluster_spec(body: Any, name: str) -> ClusterSpec | None:
    try:
        return parse_cluster(dict(body.get("spec") or {}), name)
    except SpecError:
        return None
