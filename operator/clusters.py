"""Reconciling a ``MagnetarCluster``: check the spec, apply the objects it becomes (owned by it),
then restart or scale its pods in order, one step per call, until every pod is ready and current.

Before anything else the cluster's Secrets are made or renewed (cluster_secrets.py); a TLS Secret
the user names that cannot be used is a ``Degraded`` condition, looked at again every minute.

A new cluster comes up in stages: the bookies' and brokers' StatefulSets are made only once its
ZooKeeper's pods are ready. Started beside a ZooKeeper still starting, they shared its two cores
with it, timed out connecting (15 s) and went into the kubelet's crash-loop back-off (10, 20,
40 s ...), so a start took anywhere from 20 s to 95 s; after ZooKeeper it is one predictable step
more. A StatefulSet that exists is always applied: the stages hold back only a first creation.

A spec that cannot work (Qa > Qw > E broken, too few bookies, an unknown setting) sets the
``Degraded`` condition and a Warning Event and stops there: nothing is retried until the spec
changes, so a bad resource never becomes a crash loop.

A new image is an upgrade: the same ordered roll, its stage and versions in ``status.upgrade``
(upgrades.py). A change to a StatefulSet field the API server never updates is made by deleting
the StatefulSet with its pods orphaned and making it again (recreate.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException

from magnetar.operator import conditions, monitors, upgrades
from magnetar.operator.admin import AdminError
from magnetar.operator.autoscaling import ClusterLocks
from magnetar.operator.cluster_secrets import REVISION_ANNOTATION, Keeper, SecretError, secret_names
from magnetar.operator.gates import ClusterRef
from magnetar.operator.kube_api import Kube, failing, pod_ready
from magnetar.operator.manifests import COMPONENT, admin_url, broker_autoscaler, render_cluster, selector
from magnetar.operator.recreate import Recreator, refused_as_immutable
from magnetar.operator.resources import CLUSTERS, ClusterSpec, SpecError
from magnetar.operator.rollout import Roller, Wait
from magnetar.operator.validation import parse_cluster

CONVERGED = "Converged"
NOT_READY = "PodsNotReady"
#: the API server refused an object of the spec; forbidden ones (a quota) are tried again after
REFUSED = "Refused"
REFUSED_RETRY_S = 60.0
#: a StatefulSet is being deleted, its pods orphaned, to be made again (recreate.py)
RECREATING = "RecreatingStatefulSet"
#: a Secret the cluster needs that cannot be used yet is looked at again after
SECRET_RETRY_S = 60.0


@dataclass
class Outcome:
    """What a reconcile call leaves: the status to write, and whether to come back later."""

    status: dict[str, Any]
    retry_in: float | None = None
    retry_message: str = ""


class ClusterReconciler:
    def __init__(
        self,
        kube: Kube,
        roller: Roller,
        *,
        poll_s: float = 2.0,
        pod_monitors: bool = True,
        locks: ClusterLocks | None = None,
    ) -> None:
        self.kube = kube
        self.roller = roller
        self.poll_s = poll_s
        #: make PodMonitors where the Prometheus Operator's CRDs are installed
        self.pod_monitors = pod_monitors
        self.keeper = Keeper(kube)
        self.recreator = Recreator(kube)
        #: shared with the autoscaler, which scales autoscaled brokers between reconciles
        self.locks = locks or ClusterLocks()

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
        async with self.locks.hold(namespace, name):
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
        host = f"{cluster.name}-broker.{cluster.namespace}.svc"
        info["serviceUrl"] = f"pulsar://{host}:6650"
        if spec.tls.enabled:
            info["serviceUrlTls"] = f"pulsar+ssl://{host}:6651"
        info["metadataStore"] = cluster.metadata_url
        info["secrets"] = _secret_status(spec, cluster.name)
        try:
            secured = await self.keeper.ensure(body, cluster.name, cluster.namespace, spec)
        except SecretError as exc:
            _event(body, "Warning", exc.reason, str(exc))
            status = conditions.degraded(body, exc.reason, str(exc)) | info
            return Outcome(status, retry_in=SECRET_RETRY_S, retry_message=str(exc))
        info["secretsRevision"] = secured.revision
        access = await self.keeper.admin_access(cluster.name, cluster.namespace, spec)
        cluster = ClusterRef(cluster.name, cluster.namespace, spec, access)
        objs = render_cluster(spec, cluster.name, cluster.namespace, secured)
        brokers = await self._brokers(cluster)
        # autoscaled brokers are the autoscaler's (or the HPA's) to scale: kept as they run
        targets = {"bookie": spec.bookies.replicas} | (
            {} if spec.brokers.autoscaling else {"broker": brokers}
        )
        for obj in objs:
            component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
            if obj["kind"] != "StatefulSet":
                continue
            if component in targets:
                wanted = targets[component]
                obj["spec"]["replicas"] = await self.roller.scale_down_target(cluster, component, wanted)
            elif component == "broker":
                obj["spec"]["replicas"] = brokers
        autoscaler = broker_autoscaler(spec, cluster.name)
        if (body.get("status") or {}).get("brokerAutoscaler") and autoscaler is None:
            hpa = f"{cluster.name}-broker"
            await self.kube.delete("autoscaling/v2", "HorizontalPodAutoscaler", cluster.namespace, hpa)
            _event(body, "Normal", "AutoscalerDeleted", f"Deleted HorizontalPodAutoscaler {hpa}")
        info["brokerAutoscaler"] = autoscaler["metadata"]["name"] if autoscaler else None
        components = ["bookie", "broker"]
        if not spec.metadata_store.url:
            components.insert(0, "zookeeper")
        if spec.brokers.read_only_replicas:
            components.append("broker-readonly")
        if self.pod_monitors and await self.kube.serves(monitors.GROUP, monitors.VERSION, monitors.KIND):
            objs += monitors.pod_monitors(cluster.name, components)
        held = await self._held_back(objs, cluster)
        objs = [o for o in objs if (o["kind"], o["metadata"]["name"]) not in held]
        kopf.adopt(objs, owner=body)
        digest = _digest(objs)
        previous = body.get("status") or {}
        refused = await self._apply(body, objs, cluster.namespace)
        if refused is not None:
            refused.status |= info
            return refused
        if (body.get("status") or {}).get("appliedHash") != digest:
            kinds = sorted({o["kind"] for o in objs})
            _event(body, "Normal", "Applied", f"Applied {len(objs)} objects ({', '.join(kinds)})")
        info["appliedHash"] = digest
        step = await self.roller.step(cluster, components)
        if step.action is not None:
            _event(body, "Normal", step.action.reason, step.action.message)
        if step.wait is not None:
            info["upgrade"] = upgrades.status(previous, spec.image, step.component)
            return Outcome(self._waiting(body, step.wait) | info, retry_in=self.poll_s,
                           retry_message=step.wait.message)  # fmt: skip
        pending = [
            c
            for c, want in targets.items()
            if (await self.kube.statefulset(cluster.namespace, f"{cluster.name}-{c}") or {})
            .get("spec", {})
            .get("replicas")
            != want
        ]
        if pending:
            info["upgrade"] = upgrades.status(previous, spec.image, pending[0])
            message = f"scaling {', '.join(pending)} one pod at a time"
            status = conditions.progressing(body, "Scaling", message) | info
            return Outcome(status, retry_in=self.poll_s, retry_message=message)
        if spec.brokers.autoscaling is None and previous.get("autoscaling"):
            info["autoscaling"] = None  # no autoscaler keeps it any more
        info["upgrade"] = upgrades.status(previous, spec.image, None)
        scaled = " (autoscaled)" if spec.brokers.autoscaling else ""
        message = f"{spec.bookies.replicas} bookie(s), {brokers} broker(s){scaled} ready and current"
        was_ready = conditions.find(body.get("status"), "Ready")
        if not was_ready or was_ready.get("status") != "True" or was_ready.get("reason") != CONVERGED:
            _event(body, "Normal", CONVERGED, message)
        return Outcome(conditions.ready(body, CONVERGED, message) | info)

    async def _brokers(self, cluster: ClusterRef) -> int:
        """The serving brokers to run: the spec's replicas; autoscaled, as many as run now (min for
        a StatefulSet not made yet)."""
        scaling = cluster.spec.brokers.autoscaling
        if scaling is None:
            return cluster.spec.brokers.replicas
        sts = await self.kube.statefulset(cluster.namespace, f"{cluster.name}-broker")
        return scaling.min if sts is None else int(sts["spec"].get("replicas") or 0)

    async def _held_back(self, objs: list[dict[str, Any]], cluster: ClusterRef) -> set[tuple[str, str]]:
        """The StatefulSets not to make yet: the bookies' and brokers' while the cluster's own
        ZooKeeper is not ready (the roller reports the wait for ZooKeeper meanwhile)."""
        if cluster.spec.metadata_store.url:
            return set()
        namespace = cluster.namespace
        zookeeper = await self.kube.statefulset(namespace, f"{cluster.name}-zookeeper")
        if zookeeper is not None:
            wanted = int(zookeeper["spec"].get("replicas") or 0)
            pods = await self.kube.pods(namespace, selector(cluster.name, "zookeeper"))
            if sum(1 for p in pods if pod_ready(p)) >= wanted:
                return set()
        later = [
            o["metadata"]["name"]
            for o in objs
            if o["kind"] == "StatefulSet" and o["metadata"]["labels"].get(COMPONENT) != "zookeeper"
        ]
        return {("StatefulSet", n) for n in later if await self.kube.statefulset(namespace, n) is None}

    @staticmethod
    def _waiting(body: Any, wait: Wait) -> dict[str, Any]:
        if not wait.failing:
            return conditions.progressing(body, wait.reason, wait.message)
        # One Warning Event per failure, not one per poll: only when the reason is new.
        before = conditions.find(body.get("status"), "Degraded") or {}
        if before.get("status") != "True" or before.get("reason") != wait.reason:
            _event(body, "Warning", wait.reason, wait.message)
        return conditions.degraded(body, wait.reason, wait.message)

    async def _apply(self, body: Any, objs: list[dict[str, Any]], namespace: str) -> Outcome | None:
        """Apply every object; an API server's refusal ends the reconcile as a Degraded outcome
        (the reason on the resource, never a traceback loop). A spec it finds invalid waits for
        the spec to change; one it forbids now (a quota, a conflict) is tried again later. A
        StatefulSet refused for a field that never changes is made again instead (recreate.py),
        the reconcile coming back until it exists with the new spec."""
        for obj in objs:
            try:
                await self.kube.apply(obj, namespace)
            except ApiException as exc:
                if exc.status is None or exc.status >= 500 or exc.status == 429:
                    raise  # the API server's own trouble: kopf tries again
                if refused_as_immutable(obj, exc):
                    message, deleted = await self.recreator.recreate(namespace, obj)
                    if deleted:
                        _event(body, "Normal", RECREATING, message)
                    status = conditions.progressing(body, RECREATING, message)
                    return Outcome(status, retry_in=self.poll_s, retry_message=message)
                what = f"{obj['kind']} {obj['metadata']['name']}"
                message = f"the API server refused {what} (HTTP {exc.status}): {_api_message(exc)}"
                retry = None if exc.status in (400, 422) else REFUSED_RETRY_S
                _event(body, "Warning", REFUSED, message)
                status = conditions.degraded(body, REFUSED, message)
                return Outcome(status, retry_in=retry, retry_message=message)
        return None


def _api_message(exc: ApiException) -> str:
    """The message of the API server's Status answer, else its HTTP reason."""
    with contextlib.suppress(TypeError, ValueError, AttributeError):
        return str(json.loads(exc.body or "")["message"])
    return str(exc.reason)


class HealthWatch:
    """Between changes nothing else looks at a converged cluster: this notices pods that stop
    being ready (Degraded ``PodsNotReady``, a Warning Event) and their return (Ready again). It
    only observes; it leaves any cluster whose status a reconcile is driving alone."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def check(self, name: str, namespace: str) -> None:
        body = await self.kube.get_custom(CLUSTERS, namespace, name)
        if body is None:
            return
        spec = cluster_spec(body, name)
        status = body.get("status") or {}
        ready = conditions.find(status, "Ready") or {}
        degraded = conditions.find(status, "Degraded") or {}
        current = status.get("observedGeneration") == body["metadata"].get("generation")
        watching = ready.get("reason") == CONVERGED and ready.get("status") == "True"
        unhealthy = degraded.get("reason") == NOT_READY and degraded.get("status") == "True"
        if spec is None or spec.external is not None or not current or not (watching or unhealthy):
            return
        short = await self._short(spec, name, namespace, status.get("autoscaling") or {})
        if short and watching:
            message = "; ".join(short)
            _event(body, "Warning", NOT_READY, message)
            await self.kube.patch_custom_status(
                CLUSTERS, namespace, name, conditions.degraded(body, NOT_READY, message)
            )
        elif not short and unhealthy:
            message = "every pod ready again"
            _event(body, "Normal", CONVERGED, message)
            await self.kube.patch_custom_status(
                CLUSTERS, namespace, name, conditions.ready(body, CONVERGED, message)
            )

    async def _short(
        self, spec: ClusterSpec, name: str, namespace: str, autoscaling: dict[str, Any]
    ) -> list[str]:
        wanted = {"bookie": spec.bookies.replicas, "broker": spec.brokers.replicas}
        scaling = spec.brokers.autoscaling
        if scaling is not None:
            # autoscaled: the brokers that run, but for those the operator's autoscaler is still
            # bringing in (a new pod is not ready at once); an HPA's decisions are not known here
            sts = await self.kube.statefulset(namespace, f"{name}-broker") or {}
            running = int(sts.get("spec", {}).get("replicas") or 0)
            joining = len(autoscaling.get("joining") or [])
            wanted["broker"] = scaling.min if scaling.target.type == "CPU" else running - joining
        if not spec.metadata_store.url:
            wanted["zookeeper"] = spec.metadata_store.zookeeper.replicas
        if spec.brokers.read_only_replicas:
            wanted["broker-readonly"] = spec.brokers.read_only_replicas
        short = []
        for component, replicas in wanted.items():
            pods = await self.kube.pods(namespace, selector(name, component))
            ready = sum(1 for p in pods if pod_ready(p))
            if ready < replicas:
                _, problems = failing(p for p in pods if not pod_ready(p))
                why = f" ({problems})" if problems else ""
                short.append(f"{component}: {ready}/{replicas} ready{why}")
        return short


class SecretRenewal:
    """The timer's part: renew what is due (security.Keeper.ensure) and, when what the pods mount
    changed since the last reconcile (a certificate re-issued here, or one cert-manager renewed),
    mark the resource so that a reconcile restarts the pods onto it."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.keeper = Keeper(kube)

    async def check(self, body: Any, name: str, namespace: str) -> str | None:
        """The new revision when the resource was marked, else None."""
        spec = cluster_spec(body, name)
        if spec is None or spec.external is not None or not (spec.auth.enabled or spec.tls.enabled):
            return None
        status = body.get("status") or {}
        if "secretsRevision" not in status:
            return None  # not reconciled yet: the reconcile makes the Secrets
        secured = await self.keeper.ensure(body, name, namespace, spec)
        marked = (body["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION)
        if secured.revision in (status["secretsRevision"], marked):
            return None
        await self.kube.annotate_custom(CLUSTERS, namespace, name, {REVISION_ANNOTATION: secured.revision})
        return secured.revision


def _secret_status(spec: ClusterSpec, name: str) -> dict[str, str]:
    """The names of the cluster's Secrets (for people and tools; never their values)."""
    names = secret_names(name)
    found: dict[str, str] = {}
    if spec.auth.enabled:
        found |= {"tokenKey": names.token_key, "superUserToken": names.superuser_token}
    if spec.tls.enabled:
        if spec.tls.secret_name:
            found["tls"] = spec.tls.secret_name
        else:
            found |= {"ca": names.ca, "brokerTls": names.broker_tls, "bookieTls": names.bookie_tls}
    return found


def _digest(objs: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(objs, sort_keys=True).encode()).hexdigest()[:16]


def _event(body: Any, type_: str, reason: str, message: str) -> None:
    kopf.event(body, type=type_, reason=reason, message=message)


def cluster_spec(body: Any, name: str) -> ClusterSpec | None:
    try:
        return parse_cluster(dict(body.get("spec") or {}), name)
    except SpecError:
        return None
