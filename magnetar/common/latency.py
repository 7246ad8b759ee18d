"""Latency histograms cheap enough for the publish path, exported as Prometheus histograms.

A broker's and a bookie's ``/metrics`` show where a publish spends its time (the broker's
receipt of SEND to its SEND_RECEIPT, the managed ledger's add to Qa bookies, a bookie's add
request, its journal's group commit and fdatasync), so a client's latency can be taken apart
without a profiler. Observing is a bisect and two additions, no lock: every observer runs on the
process's event loop (the journal's thread records through ``observe`` after its loop resumes).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence

from prometheus_client.core import HistogramMetricFamily

#: bucket upper bounds, seconds: fine below 10 ms, where a healthy publish lives
BOUNDS_S: tuple[float, ...] = (
    0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05,
    0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
)  # fmt: skip


class LatencyHistogram:
    """Durations counted in fixed buckets (``BOUNDS_S`` and +Inf), with their sum."""

    def __init__(self, bounds: Sequence[float] = BOUNDS_S) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum_s = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.sum_s += seconds

    def since(self, started: float) -> None:
        """Observe the time from ``started`` (``time.perf_counter()``) to now."""
        self.observe(time.perf_counter() - started)

    @property
    def count(self) -> int:
        return sum(self.counts)

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative counts by upper bound, as Prometheus' text format names them."""
        cumulative, buckets = 0, []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(cumulative)))
        return buckets

    def family(self, name: str, documentation: str) -> HistogramMetricFamily:
        return HistogramMetricFamily(name, documentation, buckets=self.buckets(), sum_value=self.sum_s)
