"""The operator's own Prometheus metrics: how many reconciles each kind of resource had and how
they ended, how long they took, and every resource's current conditions (what the ``status`` of
each MagnetarCluster, MagnetarNamespace and MagnetarBundle says, as series a dashboard can count).

kopf exports no metrics of its own; ``magnetar operator run --metrics-port`` serves these.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from wsgiref.simple_server import WSGIServer

import kopf
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

#: the reconcile outcomes counted: done, asked to come back later, failed with an error
OUTCOMES = ("done", "retry", "error")


class _Conditions(Collector):
    """``magnetar_operator_condition``: 1 for each condition whose status is True, else 0."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str, str], list[dict[str, Any]]] = {}

    def set(self, kind: str, namespace: str, name: str, conditions: list[dict[str, Any]] | None) -> None:
        with self._lock:
            self._known[(kind, namespace, name)] = [dict(c) for c in conditions or []]

    def forget(self, kind: str, namespace: str, name: str) -> None:
        with self._lock:
            self._known.pop((kind, namespace, name), None)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "magnetar_operator_condition",
            "A resource's status condition: 1 when its status is True, else 0",
            labels=["kind", "namespace", "name", "type", "reason"],
        )
        with self._lock:
            for (kind, namespace, name), conditions in sorted(self._known.items()):
                for c in conditions:
                    labels = [kind, namespace, name, str(c.get("type")), str(c.get("reason") or "")]
                    family.add_metric(labels, 1.0 if c.get("status") == "True" else 0.0)
        yield family


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reconciles = Counter(
            "magnetar_operator_reconciles",
            "Reconciles of a kind of resource, by outcome (done, retry, error)",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "magnetar_operator_reconcile_duration_seconds",
            "How long one reconcile of a kind of resource took",
            ["kind"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
            registry=self.registry,
        )
        self.conditions = _Conditions()
        self.registry.register(self.conditions)
        for kind in ("MagnetarCluster", "MagnetarNamespace", "MagnetarBundle"):
            self.duration.labels(kind)
            for outcome in OUTCOMES:
                self.reconciles.labels(kind, outcome)

    @contextmanager
    def reconcile(self, kind: str) -> Iterator[None]:
        """Count and time one reconcile of ``kind``; a kopf.TemporaryError is a ``retry``."""
        start = time.monotonic()
        outcome = "error"
        try:
            yield
            outcome = "done"
        except kopf.TemporaryError:
            outcome = "retry"
            raise
        finally:
            self.reconciles.labels(kind, outcome).inc()
            self.duration.labels(kind).observe(time.monotonic() - start)

    def serve(self, port: int, host: str = "0.0.0.0") -> WSGIServer:
        """Serve ``/metrics`` on ``host:port`` from a thread (0 picks a free port: the server's
        ``server_port``) until the server's ``shutdown()``."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server
