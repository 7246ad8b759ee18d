"""Load reports: what each broker publishes every few seconds for the load manager's leader.

    /loadbalance/load/<broker id>    ephemeral, JSON LoadReport

A report holds the broker's resource usage in percent (CPU, memory, bandwidth in/out, as Pulsar's
LocalBrokerData does), its message rates and throughput, and the same figures per owned bundle
(Pulsar's NamespaceBundleStats), so the leader can pick bundles to shed and bundles to split.
The node is ephemeral: a dead broker's report disappears with its session.

Resource usage is the broker process's own, not the host's: several brokers often share one host
(``magnetar local``), and host-wide figures would make them all look alike. Bandwidth is counted
only when ``load_balancer_override_broker_nic_speed_gbps`` names the link speed (Pulsar detects
the NIC; a loopback has none).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Protocol

from magnetar.broker.namespace import Bundle, topic_hash
from magnetar.broker.topic import Topic
from magnetar.common.metadata import BadVersionError, MetadataStore, NodeExistsError, NoNodeError

LOAD_REPORTS = "/loadbalance/load"
MB = 1024 * 1024


@dataclass
class BundleStats:
    """One owned bundle's traffic (Pulsar's NamespaceBundleStats)."""

    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0  # bytes/s
    msg_throughput_out: float = 0.0
    topics: int = 0
    producers: int = 0
    consumers: int = 0

    @property
    def throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def sessions(self) -> int:
        return self.producers + self.consumers


@dataclass
class LoadReport:
    broker_id: str
    #: percent of what the broker may use (0-100)
    cpu: float = 0.0
    memory: float = 0.0
    bandwidth_in: float = 0.0
    bandwidth_out: float = 0.0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    topics: int = 0
    connections: int = 0
    #: ``tenant/ns/0x00000000_0x40000000`` -> stats, for every owned bundle
    bundles: dict[str, BundleStats] = field(default_factory=dict)
    timestamp: float = 0.0

    @property
    def throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, data: bytes) -> LoadReport:
        doc = json.loads(data)
        doc["bundles"] = {k: BundleStats(**v) for k, v in doc.get("bundles", {}).items()}
        return cls(**doc)


def bundle_key(namespace: str, bundle: Bundle) -> str:
    return f"{namespace}/{bundle.name}"


def split_bundle_key(key: str) -> tuple[str, Bundle]:
    namespace, name = key.rsplit("/", 1)
    return namespace, Bundle.parse(name)


class LoadedTopics(Protocol):
    """The broker's loaded topics, by canonical name."""

    def items(self) -> list[tuple[str, Topic]]: ...

    def __len__(self) -> int: ...


class Counted(Protocol):
    def __len__(self) -> int: ...


class LoadSampler:
    """Turns the broker's counters into a LoadReport: rates over the time since the last sample."""

    def __init__(
        self,
        broker_id: str,
        topics: LoadedTopics,
        connections: Counted,
        owned: Callable[[], list[tuple[str, Bundle]]],
        *,
        nic_speed_gbps: float | None,
    ) -> None:
        self._broker_id = broker_id
        self._topics = topics
        self._connections = connections
        self._owned = owned
        self._nic_speed_gbps = nic_speed_gbps
        self._last_time = time.monotonic()
        self._last_cpu = _cpu_seconds()
        #: topic -> (messages in, bytes in, messages out, bytes out) at the last sample
        self._last_counts: dict[str, tuple[int, int, int, int]] = {}
        #: test-only overrides of resource usage (percent), see the admin's internal/load
        self.injected: dict[str, float] = {}

    def sample(self) -> LoadReport:
        now = time.monotonic()
        elapsed = max(now - self._last_time, 1e-3)
        cpu_now = _cpu_seconds()
        cpu = 100 * (cpu_now - self._last_cpu) / elapsed / (os.cpu_count() or 1)
        self._last_time, self._last_cpu = now, cpu_now
        report = LoadReport(
            self._broker_id,
            cpu=cpu,
            memory=_memory_percent(),
            topics=len(self._topics),
            connections=len(self._connections),
            timestamp=time.time(),
        )
        owned = self._owned()
        stats = {bundle_key(ns, b): BundleStats() for ns, b in owned}
        counts: dict[str, tuple[int, int, int, int]] = {}
        for key, topic in self._topics.items():
            dispatchers = [s.dispatcher for s in topic.subscriptions.values()]
            now_counts = (
                topic.messages_in,
                topic.bytes_in,
                sum(d.messages_out for d in dispatchers),
                sum(d.bytes_out for d in dispatchers),
            )
            counts[key] = now_counts
            before = self._last_counts.get(key, now_counts)
            rates = [max(0, a - b) / elapsed for a, b in zip(now_counts, before, strict=True)]
            report.msg_rate_in += rates[0]
            report.msg_throughput_in += rates[1]
            report.msg_rate_out += rates[2]
            report.msg_throughput_out += rates[3]
            namespace = topic.name.namespace_name
            value = topic_hash(key)
            bundle = next((b for ns, b in owned if ns == namespace and b.contains(value)), None)
            if bundle is None:
                continue
            entry = stats[bundle_key(namespace, bundle)]
            entry.msg_rate_in += rates[0]
            entry.msg_throughput_in += rates[1]
            entry.msg_rate_out += rates[2]
            entry.msg_throughput_out += rates[3]
            entry.topics += 1
            entry.producers += len(topic.producers)
            entry.consumers += len(topic.consumers())
        self._last_counts = counts
        report.bundles = stats
        nic_gbps = self._nic_speed_gbps
        if nic_gbps:
            limit = nic_gbps * 1e9 / 8
            report.bandwidth_in = 100 * report.msg_throughput_in / limit
            report.bandwidth_out = 100 * report.msg_throughput_out / limit
        for name, percent in self.injected.items():
            setattr(report, name, percent)
        return report


async def publish(store: MetadataStore, report: LoadReport) -> None:
    """Write the report to the broker's ephemeral node, creating it when missing (first report,
    or the session expired). Never an unconditional put: that would create a persistent node,
    and a dead broker's report would outlive it."""
    path = f"{LOAD_REPORTS}/{report.broker_id}"
    stat = await store.exists(path)
    if stat is None:
        with contextlib.suppress(NodeExistsError):
            await store.create(path, report.encode(), ephemeral=True)
            return
        stat = await store.exists(path)
    if stat is not None:
        with contextlib.suppress(NoNodeError, BadVersionError):
            await store.put(path, report.encode(), expected_version=stat.version)


async def read_all(store: MetadataStore) -> dict[str, LoadReport]:
    """The live brokers' latest reports, by broker id."""
    try:
        names = await store.children(LOAD_REPORTS)
    except NoNodeError:
        return {}
    reports = {}
    for name in names:
        with contextlib.suppress(NoNodeError):
            reports[name] = LoadReport.decode((await store.get(f"{LOAD_REPORTS}/{name}"))[0])
    return reports


async def withdraw(store: MetadataStore, broker_id: str) -> None:
    with contextlib.suppress(NoNodeError):
        await store.delete(f"{LOAD_REPORTS}/{broker_id}")


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _memory_percent() -> float:
    """Resident memory of this process, in percent of the host's physical memory."""
    try:
        with open("/proc/self/statm") as statm:
            resident_pages = int(statm.read().split()[1])
        return 100 * resident_pages / os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, IndexError):
        return 0.0
