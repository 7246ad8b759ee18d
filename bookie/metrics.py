"""Prometheus ``/metrics`` of a bookie, with BookKeeper's metric names where one exists.

Values are read from the running objects at scrape time (a custom collector), so counting costs
the add path one integer increment. Served by aiohttp on ``prometheus_stats_http_port``
(BookKeeper's ``prometheusStatsHttpPort``, default 8000; 0 picks a free port), beside BookKeeper's
readiness endpoint ``/api/v1/bookie/is_ready``: 200 while the bookie takes writes, 503 while it
is read-only. The server starts once the bookie has registered, so an answer means registered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.common.loop_monitor import LoopCollector, LoopMonitor

if TYPE_CHECKING:
    from magnetar.bookie.autorecovery.service import AutoRecovery
    from magnetar.bookie.bookie import Bookie


class BookieCollector(Collector):
    def __init__(self, bookie: Bookie, recovery: AutoRecovery | None) -> None:
        self._bookie = bookie
        self._recovery = recovery

    def collect(self) -> Iterator[Metric]:
        bookie, stats = self._bookie, self._bookie.stats
        yield GaugeMetricFamily(
            "bookie_SERVER_STATUS",
            "1 when the bookie accepts writes, 0 when read-only",
            0 if bookie.read_only else 1,
        )
        yield CounterMetricFamily("bookkeeper_server_ADD_ENTRY", "Entries stored", stats.adds)
        yield CounterMetricFamily(
            "bookkeeper_server_ADD_ENTRY_BYTES", "Payload bytes stored", stats.add_bytes
        )
        yield CounterMetricFamily(
            "bookkeeper_server_ADD_ENTRY_REFUSED",
            "Entries refused (fenced, read-only, bad digest)",
            stats.refused_adds,
        )
        requests = CounterMetricFamily(
            "magnetar_bookie_add_requests",
            "Add requests by protocol: grpc (the AddEntries stream) or framed (the add port)",
            labels=["protocol"],
        )
        for protocol, count in stats.add_requests.items():
            requests.add_metric([protocol], count)
        yield requests
        yield CounterMetricFamily("bookkeeper_server_READ_ENTRY", "Entries read", stats.reads)
        yield CounterMetricFamily(
            "bookkeeper_server_READ_ENTRY_CORRUPT",
            "Reads that found a corrupt entry (never served)",
            stats.corrupt_reads,
        )
        yield CounterMetricFamily("bookie_journal_JOURNAL_SYNC", "Journal fsyncs", bookie.journal.fsync_count)
        yield CounterMetricFamily(
            "bookie_journal_JOURNAL_ADD_ENTRY", "Journal records", bookie.journal.record_count
        )
        yield GaugeMetricFamily(
            "bookie_ledgers_count", "Ledgers stored on this bookie", len(bookie.storage.ledgers())
        )
        yield stats.add_request_latency.family(
            "bookkeeper_server_ADD_ENTRY_REQUEST_seconds",
            "An add request in the bookie: decoded to answered, its journal fdatasync included",
        )
        yield bookie.journal.add_latency.family(
            "bookie_journal_JOURNAL_ADD_ENTRY_seconds",
            "A journal record from append to durable: group wait, write and fdatasync",
        )
        yield bookie.journal.sync_latency.family(
            "bookie_journal_JOURNAL_SYNC_seconds", "One group commit's write and fdatasync"
        )
        if self._recovery is not None:
            yield from self._recovery_metrics(self._recovery)

    @staticmethod
    def _recovery_metrics(recovery: AutoRecovery) -> Iterator[Metric]:
        auditor = recovery.auditor
        if auditor.is_auditor:
            yield GaugeMetricFamily(
                "bookkeeper_auditor_NUM_UNDER_REPLICATED_LEDGERS",
                "Ledgers marked under-replicated (exported by the auditor only)",
                auditor.under_replicated,
            )
        progress = recovery.worker.progress
        yield CounterMetricFamily(
            "bookkeeper_replication_worker_REREPLICATE_BYTES", "Payload bytes re-replicated", progress.bytes
        )
        yield CounterMetricFamily(
            "bookkeeper_replication_worker_REREPLICATE_ENTRIES", "Entries re-replicated", progress.entries
        )
        yield CounterMetricFamily(
            "bookkeeper_replication_worker_REREPLICATED_LEDGERS",
            "Ledgers fully re-replicated",
            progress.ledgers,
        )


class MetricsServer:
    def __init__(self, bookie: Bookie, recovery: AutoRecovery | None, host: str, port: int) -> None:
        self._bookie = bookie
        self._registry = CollectorRegistry()
        self._registry.register(BookieCollector(bookie, recovery))
        self.loop_monitor = LoopMonitor()
        self._registry.register(LoopCollector(self.loop_monitor))
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        self.loop_monitor.start()
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/api/v1/bookie/is_ready", self._is_ready)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self._port

    async def _metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _is_ready(self, _request: web.Request) -> web.Response:
        if self._bookie.read_only:
            return web.Response(status=503, text="read-only: not taking writes\n")
        return web.Response(text="OK\n")

    async def stop(self) -> None:
        self.loop_monitor.stop()
        if self._runner is not None:
            await self._runner.cleanup()
