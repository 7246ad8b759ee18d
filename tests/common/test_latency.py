"""The latency histograms of /metrics: Prometheus' bucket rules (``le`` is at most)."""

from __future__ import annotations

from magnetar.common.latency import LatencyHistogram


def test_a_duration_on_a_bound_counts_in_that_bucket_and_every_later_one() -> None:
    histogram = LatencyHistogram(bounds=(0.001, 0.01))
    for seconds in (0.0005, 0.001, 0.002, 0.5):
        histogram.observe(seconds)
    (family,) = [histogram.family("x_seconds", "test")]
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name == "x_seconds_bucket"}
    assert buckets == {"0.001": 2, "0.01": 3, "+Inf": 4}
    count = next(s.value for s in family.samples if s.name == "x_seconds_count")
    total = next(s.value for s in family.samples if s.name == "x_seconds_sum")
    assert (count, round(total, 4)) == (4, 0.5035)
