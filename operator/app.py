"""The operator: kopf handlers for the three resources, wired into one registry, and the settings
that keep it robust (progress in annotations under ``magnetar.dev``, watch timeouts so a silently
dropped watch is re-established, Events only for what the operator did).

Everything the handlers need comes in one :class:`Deps`, so tests run the real operator in-process
against a real API server with their own gates and timings.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kopf
from kubernetes import client

from magnetar.operator import conditions, racks
from magnetar.operator.autoscaling import (
    AdminLoadReader,
    AdminSpreader,
    Autoscaler,
    ClusterLocks,
    LoadReader,
    Spreader,
)
from magnetar.operator.bundles import BundleActions
from magnetar.operator.cluster_secrets import REVISION_ANNOTATION, SecretError
from magnetar.operator.clusters import ClusterReconciler, HealthWatch, SecretRenewal
from magnetar.operator.gates import AdminDrainer, Drainer, MetadataReplicationGate, ReplicationGate
from magnetar.operator.kube_api import Kube
from magnetar.operator.manifests import RACK_NODE_LABEL
from magnetar.operator.metrics import OperatorMetrics
from magnetar.operator.namespaces import NamespaceReconciler, Unresolved
from magnetar.operator.resources import BUNDLES, CLUSTERS, GROUP, NAMESPACES, VERSION, SpecError
from magnetar.operator.rollout import READY_DEADLINE_S, Roller

log = logging.getLogger(__name__)
PREFIX = "magnetar.dev"
T = TypeVar("T")


@dataclass
class Deps:
    api: client.ApiClient
    gate: ReplicationGate = field(default_factory=MetadataReplicationGate)
    drainer: Drainer = field(default_factory=AdminDrainer)
    #: autoscaled brokers' load figures, and what moves bundles onto new brokers
    load_reader: LoadReader = field(default_factory=AdminLoadReader)
    spreader: Spreader = field(default_factory=AdminSpreader)
    #: how often autoscaled brokers' load is looked at (an HPA's sync period)
    autoscale_interval_s: float = 15.0
    #: how often a converging cluster is looked at again
    poll_s: float = 2.0
    #: how long a restarted pod may take to become ready before its roll halts, Degraded
    ready_deadline_s: float = READY_DEADLINE_S
    #: how often bundles are mirrored from the cluster
    mirror_interval_s: float = 15.0
    #: how long an unresolved namespace or bundle waits before the next try
    retry_s: float = 15.0
    #: how often a converged cluster's pods are checked
    health_interval_s: float = 30.0
    #: how often a cluster's certificates are checked for renewal
    renew_interval_s: float = 3600.0
    #: make PodMonitors for clusters where the Prometheus Operator's CRDs are installed
    pod_monitors: bool = True
    #: the operator's own metrics (served by ``run --metrics-port``)
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)


def settings(*, peering: str | None = None, standalone: bool = True) -> kopf.OperatorSettings:
    s = kopf.OperatorSettings()
    s.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    s.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    s.persistence.finalizer = f"{PREFIX}/finalizer"
    # A watch the network drops without a word would otherwise leave the operator deaf forever.
    s.watching.server_timeout = 300
    s.watching.client_timeout = 330
    s.watching.connect_timeout = 30
    # Events are the operator's actions (posted explicitly); kopf's own log lines, such as each
    # "failed temporarily" while a rollout waits, would bury them.
    s.posting.level = logging.CRITICAL
    # A deleted resource keeps its finalizer until its timers have stopped. kopf gives a timer a few
    # loop cycles to stop, then looks again when the resource changes or after
    # `cancellation_polling` (60 s by default). The timers that call a cluster abandon their pass
    # when told to stop (_unless_stopped); this is for the moment that takes.
    s.background.instant_exit_timeout = 1.0
    s.background.cancellation_polling = 2.0
    s.peering.standalone = standalone
    if peering:
        s.peering.name = peering
        s.peering.mandatory = True
    return s


def _login(api: client.ApiClient) -> kopf.ConnectionInfo:
    cfg = api.configuration
    token = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    scheme = None
    if token and " " in token:
        scheme, token = token.split(" ", 1)
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        scheme=scheme or ("Bearer" if token else None),
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
    )


def _write(patch: kopf.Patch, status: dict[str, Any]) -> None:
    for key, value in status.items():
        patch.status[key] = value


def registry(deps: Deps) -> kopf.OperatorRegistry:
    reg = kopf.OperatorRegistry()
    kube = Kube(deps.api)
    roller = Roller(kube, deps.gate, deps.drainer, ready_deadline_s=deps.ready_deadline_s)
    locks = ClusterLocks()
    clusters = ClusterReconciler(
        kube, roller, poll_s=deps.poll_s, pod_monitors=deps.pod_monitors, locks=locks
    )
    autoscaler = Autoscaler(kube, deps.drainer, deps.load_reader, deps.spreader, locks)
    namespaces = NamespaceReconciler(kube)
    bundles = BundleActions(kube)

    @kopf.on.login(registry=reg)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return _login(deps.api)

    # -- MagnetarCluster ------------------------------------------------------------------------
    @kopf.on.resume(GROUP, VERSION, CLUSTERS, registry=reg)
    @kopf.on.create(GROUP, VERSION, CLUSTERS, registry=reg)
    # Each new generation, not each new spec: a spec set back to the last one a reconcile
    # finished (the previous image, while a roll to a broken one is halted) is no change of the
    # spec to kopf, which would then drop the halted handler and leave the roll halted.
    @kopf.on.update(GROUP, VERSION, CLUSTERS, registry=reg, field=("metadata", "generation"))
    # the renewal timer's mark: the Secrets the pods mount changed, restart them onto the new ones
    @kopf.on.update(
        GROUP, VERSION, CLUSTERS, registry=reg, field=("metadata", "annotations", REVISION_ANNOTATION)
    )
    async def reconcile_cluster(
        body: kopf.Body, name: str, namespace: str | None, patch: kopf.Patch, **_: Any
    ) -> None:
        with deps.metrics.reconcile("MagnetarCluster"):
            outcome = await clusters.reconcile(body, name, namespace or "default")
            _write(patch, outcome.status)
            if outcome.retry_in is not None:
                raise kopf.TemporaryError(outcome.retry_message, delay=outcome.retry_in)

    # Every resource's conditions as the API server has them, whoever wrote them (a reconcile,
    # the health timer); a deleted one leaves the metrics. An event handler adds no finalizer.
    @kopf.on.event(GROUP, VERSION, CLUSTERS, registry=reg)
    @kopf.on.event(GROUP, VERSION, NAMESPACES, registry=reg)
    @kopf.on.event(GROUP, VERSION, BUNDLES, registry=reg)
    async def observe_conditions(body: kopf.Body, type: str | None, **_: Any) -> None:
        key = (body["kind"], body.metadata.namespace or "", body.metadata.name or "")
        if type == "DELETED":
            deps.metrics.conditions.forget(*key)
        else:
            deps.metrics.conditions.set(*key, (body.get("status") or {}).get("conditions"))

    health = HealthWatch(kube)

    @kopf.timer(
        GROUP, VERSION, CLUSTERS, registry=reg, interval=deps.health_interval_s, idle=deps.health_interval_s
    )
    async def watch_health(name: str, namespace: str | None, **kwargs: Any) -> None:
        try:
            await _unless_stopped(kwargs["stopped"], health.check(name, namespace or "default"))
        except Exception as exc:  # the next tick tries again; a timer must not die
            log.warning("health check of %s/%s failed: %s", namespace, name, exc)

    @kopf.timer(
        GROUP, VERSION, CLUSTERS, registry=reg, interval=deps.autoscale_interval_s,
        field=("spec", "brokers", "autoscaling"), value=kopf.PRESENT,
    )  # fmt: skip
    async def autoscale_brokers(body: kopf.Body, name: str, namespace: str | None, **_: Any) -> None:
        try:
            state = await autoscaler.tick(body, name, namespace or "default")
        except Exception as exc:  # the next tick tries again; a timer must not die
            log.warning("autoscaling the brokers of %s/%s failed: %s", namespace, name, exc)
            return
        if state is not None and state != (body.get("status") or {}).get("autoscaling"):
            await kube.patch_custom_status(CLUSTERS, namespace or "default", name, {"autoscaling": state})

    renewal = SecretRenewal(kube)

    @kopf.timer(
        GROUP, VERSION, CLUSTERS, registry=reg, interval=deps.renew_interval_s, idle=deps.renew_interval_s
    )
    async def renew_secrets(body: kopf.Body, name: str, namespace: str | None, **_: Any) -> None:
        try:
            revision = await renewal.check(body, name, namespace or "default")
        except SecretError as exc:  # the reconcile reports it as a condition
            log.info("secrets of %s/%s: %s", namespace, name, exc)
            return
        except Exception as exc:  # the next tick tries again; a timer must not die
            log.warning("renewing the secrets of %s/%s failed: %s", namespace, name, exc)
            return
        if revision is not None:
            log.info("secrets of %s/%s renewed: restarting its pods onto them", namespace, name)

    # -- bookie pods: the rack of the node each one is scheduled to -----------------------------
    @kopf.on.event("", "v1", "pods", registry=reg, annotations={RACK_NODE_LABEL: kopf.PRESENT})
    async def bookie_rack(body: kopf.Body, type: str | None, **_: Any) -> None:
        if type == "DELETED":
            return
        try:
            await racks.assign(kube, dict(body))
        except Exception as exc:  # the pod's next change (or the next watch) tries again
            log.warning("rack of pod %s/%s: %s", body.metadata.namespace, body.metadata.name, exc)

    # -- MagnetarNamespace ----------------------------------------------------------------------
    @kopf.on.resume(GROUP, VERSION, NAMESPACES, registry=reg)
    @kopf.on.create(GROUP, VERSION, NAMESPACES, registry=reg)
    @kopf.on.update(GROUP, VERSION, NAMESPACES, registry=reg, field="spec")
    async def apply_namespace(body: kopf.Body, namespace: str | None, patch: kopf.Patch, **_: Any) -> None:
        with deps.metrics.reconcile("MagnetarNamespace"):
            try:
                _write(patch, await namespaces.apply(body, namespace or "default"))
            except (SpecError, Unresolved) as exc:
                _unresolved(body, patch, exc, deps.retry_s)

    @kopf.on.delete(GROUP, VERSION, NAMESPACES, registry=reg)
    async def delete_namespace(body: kopf.Body, namespace: str | None, **_: Any) -> None:
        await namespaces.delete(body, namespace or "default")

    @kopf.timer(GROUP, VERSION, NAMESPACES, registry=reg, interval=deps.mirror_interval_s, initial_delay=1.0)
    async def mirror_bundles(
        body: kopf.Body, name: str, namespace: str | None, patch: kopf.Patch, **kwargs: Any
    ) -> None:
        ready = conditions.find(body.get("status"), "Ready")
        if not ready or ready.get("status") != "True":
            return  # not applied yet: nothing to mirror
        try:
            mirrored = await _unless_stopped(
                kwargs["stopped"], namespaces.mirror(body, name, namespace or "default")
            )
            if mirrored is not None:
                patch.status["bundles"] = mirrored
        except (SpecError, Unresolved) as exc:
            log.info("mirroring bundles of %s/%s: %s", namespace, name, exc)
        except Exception as exc:  # the next tick tries again; a timer must not die
            log.warning("mirroring bundles of %s/%s failed: %s", namespace, name, exc)

    # -- MagnetarBundle -------------------------------------------------------------------------
    @kopf.on.resume(GROUP, VERSION, BUNDLES, registry=reg)
    @kopf.on.create(GROUP, VERSION, BUNDLES, registry=reg)
    @kopf.on.update(GROUP, VERSION, BUNDLES, registry=reg, field="spec")
    async def bundle_action(body: kopf.Body, namespace: str | None, patch: kopf.Patch, **_: Any) -> None:
        with deps.metrics.reconcile("MagnetarBundle"):
            try:
                status = await bundles.act(body, namespace or "default")
            except (SpecError, Unresolved) as exc:
                _unresolved(body, patch, exc, deps.retry_s)
                return
            if status is not None:
                _write(patch, status)

    return reg


async def _unless_stopped(stopped: kopf.DaemonStopped, work: Awaitable[T]) -> T | None:
    """(``stopped``: kopf passes it to timers as to daemons, though its TimerFn type does not say so.)

    A timer's pass, abandoned (None) once kopf stops the timer: its resource is being deleted or
    the operator exits. kopf never cancels a timer's pass, and waits for it before it lets a deleted
    resource go; a pass of admin calls to a cluster that does not answer, each with its own
    timeout, would hold the deletion that long. A pass only reads and mirrors, so the next one (if
    any) redoes what this one left."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stopped.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        task.cancel()  # nothing, if it is done; it ends at its next await otherwise
    return task.result() if task.done() and not task.cancelled() else None


def _unresolved(body: kopf.Body, patch: kopf.Patch, exc: SpecError | Unresolved, retry_s: float) -> None:
    """A condition and a Warning Event; a retry later only where waiting can help."""
    kopf.event(body, type="Warning", reason=exc.reason, message=str(exc))
    _write(patch, conditions.degraded(body, exc.reason, str(exc)))
    if isinstance(exc, Unresolved) and exc.retry:
        raise kopf.TemporaryError(str(exc), delay=retry_s)


async def run(
    deps: Deps,
    *,
    namespaces: Collection[str] = (),
    clusterwide: bool = False,
    peering: str | None = None,
    liveness: str | None = None,
    stop_flag: asyncio.Event | threading.Event | None = None,
    ready_flag: asyncio.Event | threading.Event | None = None,
) -> None:
    """Run the operator until ``stop_flag`` is set (or forever)."""
    await kopf.operator(
        registry=registry(deps),
        settings=settings(peering=peering, standalone=peering is None),
        clusterwide=clusterwide,
        namespaces=list(namespaces),
        liveness_endpoint=liveness,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
        standalone=peering is None,
        peering_name=peering,
    )
