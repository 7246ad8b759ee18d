"""Reading a Prometheus text page in tests: a histogram's buckets, count and sum."""

from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass


@dataclass(frozen=True)
class Histogram:
    #: cumulative counts, the +Inf bucket last
    buckets: list[float]
    count: float
    sum: float

    @property
    def mean(self) -> float:
        return self.sum / self.count

    def since(self, earlier: Histogram) -> Histogram:
        """What was observed after ``earlier`` was scraped."""
        buckets = [now - then for now, then in zip(self.buckets, earlier.buckets, strict=True)]
        return Histogram(buckets, self.count - earlier.count, self.sum - earlier.sum)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def histogram(text: str, name: str) -> Histogram:
    """The unlabelled histogram ``name`` of a /metrics page; AssertionError when it is missing."""
    buckets = [float(v) for v in re.findall(rf'^{name}_bucket{{le="[^"]+"}} (\S+)$', text, re.M)]
    count = re.search(rf"^{name}_count (\S+)$", text, re.M)
    total = re.search(rf"^{name}_sum (\S+)$", text, re.M)
    assert buckets, f"{name} missing"
    assert count is not None
    assert total is not None
    return Histogram(buckets, float(count.group(1)), float(total.group(1)))
