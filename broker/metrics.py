"""The broker's HTTP endpoint: Prometheus ``/metrics`` with Pulsar's metric names.

Per-topic gauges carry the labels Pulsar uses (``cluster``, ``namespace``, ``topic``). Rates are
computed over the interval since the previous scrape, as Pulsar computes them over its stats
interval.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService

_LABELS = ["cluster", "namespace", "topic"]


class TopicCollector(Collector):
    def __init__(self, service: BrokerService) -> None:
        self._service = service
        self._last: dict[str, tuple[float, int, int, int, int]] = {}

    def collect(self) -> Iterator[Metric]:
        families = {
            "pulsar_rate_in": "Messages/s published",
            "pulsar_rate_out": "Messages/s dispatched",
            "pulsar_throughput_in": "Bytes/s published",
            "pulsar_throughput_out": "Bytes/s dispatched",
            "pulsar_msg_backlog": "Entries not yet acknowledged, over all subscriptions",
            "pulsar_storage_size": "Bytes stored",
            "pulsar_producers_count": "Producers",
            "pulsar_subscriptions_count": "Subscriptions",
            "pulsar_consumers_count": "Consumers",
        }
        metrics = {name: GaugeMetricFamily(name, text, labels=_LABELS) for name, text in families.items()}
        now = time.monotonic()
        cluster = self._service.config.cluster_name
        for key, topic in list(self._service.topics.items()):
            labels = [cluster, topic.name.namespace_name, key]
            msgs_in = sum(p.messages_in for p in topic.producers.values())
            bytes_in = topic.ledger.bytes_added
            consumers = topic.consumers()
            msgs_out = sum(c.messages_out for c in consumers)
            bytes_out = sum(c.bytes_out for c in consumers)
            then, m_in, b_in, m_out, b_out = self._last.get(
                key, (now, msgs_in, bytes_in, msgs_out, bytes_out)
            )
            elapsed = max(now - then, 1e-9)
            self._last[key] = (now, msgs_in, bytes_in, msgs_out, bytes_out)
            values = {
                "pulsar_rate_in": (msgs_in - m_in) / elapsed if now > then else 0.0,
                "pulsar_rate_out": (msgs_out - m_out) / elapsed if now > then else 0.0,
                "pulsar_throughput_in": (bytes_in - b_in) / elapsed if now > then else 0.0,
                "pulsar_throughput_out": (bytes_out - b_out) / elapsed if now > then else 0.0,
                "pulsar_msg_backlog": sum(s.backlog for s in topic.subscriptions.values() if s.durable),
                "pulsar_storage_size": topic.ledger.total_size,
                "pulsar_producers_count": len(topic.producers),
                "pulsar_subscriptions_count": len(topic.subscriptions),
                "pulsar_consumers_count": len(consumers),
            }
            for name, value in values.items():
                metrics[name].add_metric(labels, float(value))
        yield from metrics.values()


class MetricsServer:
    def __init__(self, service: BrokerService, host: str, port: int) -> None:
        self._registry = CollectorRegistry()
        self._registry.register(TopicCollector(service))
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self.app = web.Application()
        self.app.router.add_get("/metrics", self._metrics)
        self.port = 0

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self._port

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self._registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
