"""The broker's HTTP endpoint: Prometheus ``/metrics`` with Pulsar's metric names.

Per-topic metrics carry the labels Pulsar uses (``cluster``, ``namespace``, ``topic``) and are
written by ``broker/topic_metrics.py``; the rest through prometheus_client's registry.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.loadbalance.load_report import LoadedTopics
from magnetar.broker.topic_metrics import TopicMetrics
from magnetar.common.latency import LatencyHistogram
from magnetar.common.loop_monitor import LoopCollector, LoopMonitor


class LookupCounts(Protocol):
    answers: int
    redirects: int
    failures: int


class LookupCollector(Collector):
    """Pulsar's broker-level lookup counters."""

    def __init__(self, stats: LookupCounts, cluster: str) -> None:
        self._stats = stats
        self._cluster = cluster

    def collect(self) -> Iterator[Metric]:
        for name, value, help_text in (
            ("pulsar_broker_lookup_answers", self._stats.answers, "Lookups answered"),
            ("pulsar_broker_lookup_redirects", self._stats.redirects, "Lookups answered with a redirect"),
            ("pulsar_broker_lookup_failures", self._stats.failures, "Lookups that failed"),
        ):
            counter = CounterMetricFamily(name, help_text, labels=["cluster"])
            counter.add_metric([self._cluster], float(value))
            yield counter


class LatencyCollector(Collector):
    """Latency histograms by metric name (magnetar.common.latency)."""

    def __init__(self, latencies: dict[str, tuple[LatencyHistogram, str]]) -> None:
        self._latencies = latencies

    def collect(self) -> Iterator[Metric]:
        for name, (histogram, documentation) in self._latencies.items():
            yield histogram.family(name, documentation)


def publish_latencies(
    publish: LatencyHistogram, storage_write: LatencyHistogram
) -> dict[str, tuple[LatencyHistogram, str]]:
    """Where a publish spends its time: SEND to SEND_RECEIPT on this broker, and each
    managed-ledger add to the acknowledgement of Qa bookies (Pulsar's metric names)."""
    return {
        "pulsar_broker_publish_latency_seconds": (
            publish,
            "A publish on this broker: SEND received to SEND_RECEIPT sent",
        ),
        "pulsar_storage_write_latency_seconds": (
            storage_write,
            "A managed-ledger add: to the acknowledgement of Qa bookies",
        ),
    }


class MetricsServer:
    def __init__(
        self,
        topics: LoadedTopics,
        lookups: LookupCounts,
        cluster: str,
        host: str,
        port: int,
        latencies: dict[str, tuple[LatencyHistogram, str]] | None = None,
        *,
        per_topic: bool = True,
    ) -> None:
        self._topics = TopicMetrics(topics, cluster, per_topic=per_topic)
        self._registry = CollectorRegistry()
        self._registry.register(LookupCollector(lookups, cluster))
        self._registry.register(LatencyCollector(latencies or {}))
        self.loop_monitor = LoopMonitor()
        self._registry.register(LoopCollector(self.loop_monitor))
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self.app = web.Application()
        self.app.router.add_get("/metrics", self._metrics)
        # Pulsar's health page, which its chart's probes ask for: served once the broker serves
        self.app.router.add_get("/status.html", self._status)
        self.port = 0
        #: the https:// port (web_service_port_tls), when there is one
        self.tls_port: int | None = None

    async def start(self, tls: tuple[int, ssl.SSLContext] | None = None) -> None:
        """Serve on the plain port and, given ``(port, context)``, on a TLS port too."""
        self.loop_monitor.start()
        # Lines up to 1 MiB are parsed, so the admin API answers an over-long path in JSON (414)
        # rather than aiohttp answering plain text at its 8 KB default.
        self._runner = web.AppRunner(self.app, access_log=None, max_line_size=1 << 20)
        await self._runner.setup()
        self.port = await _serve(web.TCPSite(self._runner, self._host, self._port), self._port)
        if tls is not None:
            port, context = tls
            site = web.TCPSite(self._runner, self._host, port, ssl_context=context)
            self.tls_port = await _serve(site, port)

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        """The topics' lines, then the broker's own metrics: written piece by piece, so a scrape
        of very many topics neither holds the event loop nor copies its text whole."""
        pieces = await self._topics.chunks()
        response = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE_LATEST})
        response.content_length = sum(map(len, pieces)) + len(own := generate_latest(self._registry))
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece)
        await response.write(own)
        await response.write_eof()
        return response

    async def _status(self, _request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def stop(self) -> None:
        self.loop_monitor.stop()
        if self._runner is not None:
            await self._runner.cleanup()


async def _serve(site: web.TCPSite, port: int) -> int:
    """Start ``site``; the port it bound (the one asked for, or the one 0 picked)."""
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    return int(sockets[0].getsockname()[1]) if sockets else port
