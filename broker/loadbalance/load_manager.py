"""The load manager: every broker reports its load; the leader sheds and splits bundles.

Every broker publishes a LoadReport (``load_report.py``) every
``load_balancer_report_update_min_interval_millis``. The broker elected leader (``/loadbalance/
leader``, see BrokerService) runs a cycle every ``load_balancer_shedding_interval_minutes``:

* **Shedding**, Pulsar's ThresholdShedder: a broker's usage is its highest weighted resource
  usage (CPU, memory, bandwidth in/out), smoothed over cycles with
  ``load_balancer_history_resource_percentage`` of the previous value. A broker whose usage
  exceeds the cluster average by more than ``load_balancer_broker_threshold_shedder_percentage``
  points sheds its busiest bundles until the throughput moved covers the excess (plus a 5-point
  margin), unless that is below ``load_balancer_bundle_unload_min_throughput_threshold`` MB/s.
  A broker with a single bundle keeps it; a bundle shed within
  ``load_balancer_shedding_grace_period_minutes`` is not shed again.
* Shed bundles are **transferred** to the broker placement picks (``load_balancer_transfer_
  enabled``, the default) so clients move without a backoff, or unloaded.
* **Split**: a bundle with more than one topic that exceeds any of Pulsar's thresholds (topics,
  sessions, msg rate in+out, bandwidth in+out) is split in two by its owner, while the namespace
  has fewer than ``load_balancer_namespace_maximum_bundles`` bundles.

**Placement** of an unowned bundle (any broker, at lookup), as Pulsar's defaults
(LeastLongTermMessageRate with loadBalancerDistributeBundlesEvenlyEnabled): brokers above
``load_balancer_broker_overloaded_threshold_percentage`` are skipped; of the others, the one with
the fewest bundles, then the lowest message rate (ties by id). CPU is deliberately not compared
between healthy brokers: on shared hosts it is mostly noise (startup, a burst of lookups), and
lasting differences are the shedder's job.

The decisions are pure functions over reports (``threshold_shedder``, ``place``,
``bundles_to_split``) so tests can inject reports. For real-process tests, a broker started with
``load_balancer_load_injection_enabled`` accepts ``PUT /admin/v2/internal/load`` with a JSON
object of report fields in percent (e.g. ``{"cpu": 95}``) that override its measured usage;
``{}`` clears them. ``GET /admin/v2/broker-stats/load-report`` answers the broker's latest report.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from aiohttp import web

from magnetar.admin.client import AdminError, AsyncAdminClient
from magnetar.broker.config import BrokerConfig
from magnetar.broker.loadbalance import load_report
from magnetar.broker.loadbalance.load_report import MB, LoadReport, LoadSampler, split_bundle_key
from magnetar.broker.namespace import Namespaces
from magnetar.broker.ownership import Ownership
from magnetar.common.metadata import LeaderElection, MetadataError, MetadataStore

log = logging.getLogger(__name__)

#: points added to a broker's excess when choosing how much to shed (Pulsar's ThresholdShedder)
ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05
_INJECTABLE = {"cpu", "memory", "bandwidth_in", "bandwidth_out"}


# -- decisions (pure) -------------------------------------------------------------------------
def resource_usage(report: LoadReport, config: BrokerConfig) -> float:
    """The broker's highest weighted resource usage, as a fraction (0.5 is 50 %)."""
    return (
        max(
            report.cpu * config.load_balancer_cpu_resource_weight,
            report.memory * config.load_balancer_memory_resource_weight,
            report.bandwidth_in * config.load_balancer_bandwidth_in_resource_weight,
            report.bandwidth_out * config.load_balancer_bandwidth_out_resource_weight,
        )
        / 100
    )


@dataclass
class ShedderState:
    """What the leader remembers between cycles (lost on failover, as in Pulsar)."""

    #: broker id -> smoothed usage (fraction)
    history: dict[str, float] = field(default_factory=dict)
    #: bundle key -> time.monotonic() when it was last shed
    recently_shed: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Shed:
    bundle: str  # tenant/ns/0x..._0x...
    source: str  # broker id
    reason: str


@dataclass(frozen=True)
class Split:
    bundle: str
    owner: str
    reason: str


def threshold_shedder(
    reports: dict[str, LoadReport], state: ShedderState, now: float, config: BrokerConfig
) -> list[Shed]:
    """Pulsar's ThresholdShedder over the current reports; updates ``state.history``."""
    for broker_id in list(state.history):
        if broker_id not in reports:
            del state.history[broker_id]
    history_weight = config.load_balancer_history_resource_percentage
    for broker_id, report in reports.items():
        current = resource_usage(report, config)
        previous = state.history.get(broker_id)
        state.history[broker_id] = (
            current if previous is None else previous * history_weight + current * (1 - history_weight)
        )
    grace_s = config.load_balancer_shedding_grace_period_minutes * 60
    for key, when in list(state.recently_shed.items()):
        if now - when > grace_s:
            del state.recently_shed[key]
    if len(reports) <= 1:
        return []
    average = sum(state.history.values()) / len(state.history)
    threshold = config.load_balancer_broker_threshold_shedder_percentage / 100
    min_throughput = config.load_balancer_bundle_unload_min_throughput_threshold * MB
    decisions = []
    for broker_id, report in sorted(reports.items()):
        usage = state.history[broker_id]
        if usage < average + threshold:
            continue
        share = usage - average - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
        to_offload = report.throughput * share
        if to_offload < min_throughput:
            log.info(
                "broker %s over threshold (usage %.0f%%, average %.0f%%) but would shed %.1f MB/s, "
                "under the %.1f MB/s minimum",
                broker_id, 100 * usage, 100 * average, to_offload / MB, min_throughput / MB,
            )  # fmt: skip
            continue
        if len(report.bundles) <= 1:
            log.warning("broker %s is overloaded (usage %.0f%%) with a single bundle", broker_id, 100 * usage)
            continue
        reason = f"usage {100 * usage:.0f}% > average {100 * average:.0f}% + {100 * threshold:.0f}%"
        candidates = sorted(
            ((k, s) for k, s in report.bundles.items() if k not in state.recently_shed),
            key=lambda item: (-item[1].throughput, -item[1].msg_rate, item[0]),
        )
        marked = 0.0
        for selected, (key, stats) in enumerate(candidates):
            # At least one bundle, then until the excess is covered; a broker keeps one bundle.
            if (selected and marked >= to_offload) or selected >= len(report.bundles) - 1:
                break
            decisions.append(Shed(key, broker_id, reason))
            marked += stats.throughput
    return decisions


@dataclass(frozen=True)
class Candidate:
    """A live broker as placement sees it: registry counts joined with its load report."""

    broker_id: str
    bundles: int
    topics: int
    report: LoadReport | None


def place(candidates: list[Candidate], config: BrokerConfig, exclude: set[str] | None = None) -> str | None:
    """The broker that should own a new or moved bundle (None when there is none)."""
    brokers = [c for c in candidates if c.broker_id not in (exclude or set())]
    if not brokers:
        return None

    def usage(c: Candidate) -> float:
        return resource_usage(c.report, config) if c.report is not None else 0.0

    overloaded = config.load_balancer_broker_overloaded_threshold_percentage / 100
    fit = [c for c in brokers if usage(c) < overloaded] or brokers

    def rate(c: Candidate) -> float:
        return c.report.msg_rate_in + c.report.msg_rate_out if c.report is not None else 0.0

    return min(fit, key=lambda c: (c.bundles, rate(c), c.topics, c.broker_id)).broker_id


def bundles_to_split(
    reports: dict[str, LoadReport], bundle_counts: dict[str, int], config: BrokerConfig
) -> list[Split]:
    """Bundles over Pulsar's split thresholds, at most up to each namespace's maximum."""
    if not config.load_balancer_auto_bundle_split_enabled:
        return []
    counts = dict(bundle_counts)
    decisions = []
    for broker_id, report in sorted(reports.items()):
        for key, stats in sorted(report.bundles.items()):
            namespace, _ = split_bundle_key(key)
            if stats.topics < 2 or counts.get(namespace, 0) >= config.load_balancer_namespace_maximum_bundles:
                continue
            reasons = []
            if stats.topics > config.load_balancer_namespace_bundle_max_topics:
                reasons.append(f"{stats.topics} topics")
            max_sessions = config.load_balancer_namespace_bundle_max_sessions
            if max_sessions > 0 and stats.sessions > max_sessions:
                reasons.append(f"{stats.sessions} sessions")
            if stats.msg_rate > config.load_balancer_namespace_bundle_max_msg_rate:
                reasons.append(f"{stats.msg_rate:.0f} msg/s")
            if stats.throughput / MB > config.load_balancer_namespace_bundle_max_bandwidth_mbytes:
                reasons.append(f"{stats.throughput / MB:.1f} MB/s")
            if reasons:
                decisions.append(Split(key, broker_id, ", ".join(reasons)))
                counts[namespace] = counts.get(namespace, 0) + 1
    return decisions


# -- the running load manager ----------------------------------------------------------------
class LoadManager:
    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore,
        ownership: Ownership,
        namespaces: Namespaces,
        sampler: LoadSampler,
        election: LeaderElection | None,
    ) -> None:
        self.config = config
        #: how this broker says who it is to the owners it asks to unload or split
        self._credentials = config.broker_client_credentials()
        self._store = store
        self._ownership = ownership
        self._namespaces = namespaces
        self._election = election
        self.sampler = sampler
        self.state = ShedderState()
        self.latest: LoadReport | None = None
        #: what the leader did, newest last (shown in logs and useful to tests through the admin)
        self.actions: list[str] = []

    async def leader(self) -> str | None:
        """The leader broker's id (None while none is elected, and in the read-only pool)."""
        return await self._election.leader() if self._election is not None else None

    def install(self, app: web.Application) -> None:
        app.router.add_get("/admin/v2/broker-stats/load-report", self._get_report)
        app.router.add_put("/admin/v2/internal/load", self._inject)

    async def _get_report(self, request: web.Request) -> web.Response:
        report = self.latest or self.sampler.sample()
        return web.Response(body=report.encode(), content_type="application/json")

    async def _inject(self, request: web.Request) -> web.Response:
        if not self.config.load_balancer_load_injection_enabled:
            return web.json_response(
                {"reason": "load injection is disabled (load_balancer_load_injection_enabled)"}, status=403
            )
        body = await request.json()
        if not isinstance(body, dict) or not set(body) <= _INJECTABLE:
            return web.json_response(
                {"reason": f"expected an object with keys among {sorted(_INJECTABLE)}"}, status=400
            )
        self.sampler.injected = {k: float(v) for k, v in body.items()}
        await self.report()
        return web.json_response(self.sampler.injected)

    async def run(self) -> None:
        """Report load forever; when leader, balance every shedding interval."""
        loop = asyncio.get_running_loop()
        interval_s = self.config.load_balancer_report_update_min_interval_millis / 1000
        balance_s = self.config.load_balancer_shedding_interval_minutes * 60
        next_balance = loop.time() + balance_s
        while True:
            with contextlib.suppress(Exception):
                await self.report()
            election = self._election
            if election is not None and election.is_leader and loop.time() >= next_balance:
                next_balance = loop.time() + balance_s
                if self.config.load_balancer_enabled:
                    try:
                        await self.balance()
                    except MetadataError as exc:  # the store's trouble, said elsewhere: no traceback
                        log.warning("load balancing cycle skipped: %s", exc)
                    except Exception:
                        log.exception("load balancing cycle failed")
            elif election is None or not election.is_leader:
                # A new leader starts from a fresh interval, as the old one's timing is gone.
                next_balance = loop.time() + balance_s
            await asyncio.sleep(min(interval_s, balance_s))

    async def report(self) -> None:
        if self._ownership.leaving:
            return  # its report was withdrawn: publishing would list a leaving broker again
        self.latest = self.sampler.sample()
        await load_report.publish(self._store, self.latest)

    async def candidates(self) -> list[Candidate]:
        reports = await load_report.read_all(self._store)
        return [
            Candidate(b.broker_id, b.bundles, b.topics, reports.get(b.broker_id))
            for b in await self._ownership.brokers()
        ]

    async def choose_broker(self, exclude: set[str] | None = None) -> str:
        return place(await self.candidates(), self.config, exclude) or self._ownership.me.broker_id

    async def balance(self) -> None:
        """One leader cycle: shed, then split."""
        reports = await load_report.read_all(self._store)
        if self.config.load_balancer_shedding_enabled:
            for shed in threshold_shedder(reports, self.state, time.monotonic(), self.config):
                await self._shed(shed)
        namespaces = {split_bundle_key(k)[0] for r in reports.values() for k in r.bundles}
        counts = {}
        for namespace in namespaces:
            with contextlib.suppress(Exception):
                counts[namespace] = len((await self._namespaces.policies(namespace)).bundles())
        for split in bundles_to_split(reports, counts, self.config):
            await self._split(split)

    async def _shed(self, shed: Shed) -> None:
        namespace, bundle = split_bundle_key(shed.bundle)
        owner = await self._ownership.owner(namespace, bundle)
        if owner is None or owner.broker_id != shed.source:
            return  # moved or released since the report
        query = ""
        destination = None
        if self.config.load_balancer_transfer_enabled:
            destination = place(await self.candidates(), self.config, exclude={shed.source})
            if destination is not None:
                query = f"?destinationBroker={destination}"
        verb = f"transfer to {destination}" if destination else "unload"
        log.info("shedding %s from %s (%s): %s", shed.bundle, shed.source, shed.reason, verb)
        # Through the owner's admin REST, as Pulsar's leader does (the owner unloads or transfers).
        path = f"/admin/v2/namespaces/{namespace}/{bundle.name}/unload{query}"
        try:
            await AsyncAdminClient(owner.web_service_url, credentials=self._credentials).request("PUT", path)
        except AdminError as exc:  # e.g. the destination did not take it (then it was unloaded)
            log.warning("shedding %s from %s: %s", shed.bundle, shed.source, exc)
            verb = f"{verb} failed ({exc})"
        self.state.recently_shed[shed.bundle] = time.monotonic()
        self.actions.append(f"shed {shed.bundle} from {shed.source}: {verb}")

    async def _split(self, split: Split) -> None:
        namespace, bundle = split_bundle_key(split.bundle)
        owner = await self._ownership.owner(namespace, bundle)
        if owner is None or owner.broker_id != split.owner:
            return
        log.info("splitting %s owned by %s (%s)", split.bundle, split.owner, split.reason)
        unload = "true" if self.config.load_balancer_auto_unload_split_bundles_enabled else "false"
        path = f"/admin/v2/namespaces/{namespace}/{bundle.name}/split?unload={unload}"
        await AsyncAdminClient(owner.web_service_url, credentials=self._credentials).request("PUT", path)
        self.actions.append(f"split {split.bundle}: {split.reason}")
