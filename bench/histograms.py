"""Prometheus histograms read from /metrics pages: buckets, the difference of two scrapes, a
quantile interpolated within its bucket (as Prometheus' ``histogram_quantile``)."""

from __future__ import annotations

import re
import urllib.request

Buckets = list[tuple[float, float]]  # (upper bound s, cumulative count)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def buckets(text: str, name: str, labels: str = "") -> Buckets:
    """``labels``: the labels before ``le`` as the page prints them (``generation="0",``)."""
    found = re.findall(rf'^{name}_bucket{{{re.escape(labels)}le="([^"]+)"}} (\S+)$', text, re.M)
    if not found:
        raise RuntimeError(f"{name} is not on this /metrics page: a build without it?")
    return [(float(le), float(count)) for le, count in found]


def delta(after: Buckets, before: Buckets) -> Buckets:
    return [(le, a - b) for (le, a), (_, b) in zip(after, before, strict=True)]


def quantile(cumulative: Buckets, q: float) -> float | None:
    """The ``q`` quantile in ms, linear within its bucket."""
    total = cumulative[-1][1]
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for upper, count in cumulative:
        if count >= rank:
            if upper == float("inf"):
                return lower * 1000  # beyond the last bound: its lower edge, a floor
            inside = count - below
            return (lower + (upper - lower) * ((rank - below) / inside if inside else 1)) * 1000
        lower, below = upper, count
    return None


def worst_bucket(cumulative: Buckets) -> float | None:
    """The upper bound (ms) of the highest bucket any sample fell in: the worst sample is at most
    this (infinity: beyond the last bound)."""
    previous = 0.0
    worst = None
    for upper, count in cumulative:
        if count > previous:
            worst = upper * 1000
        previous = count
    return worst


def counter(text: str, name: str, labels: str) -> float:
    """A labelled sample's value (0 when the page has no such sample)."""
    found = re.search(rf"^{name}{{{re.escape(labels)}}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def histogram_sum(text: str, name: str, labels: str) -> float:
    """A labelled histogram's ``_sum`` (0 when the page has no such sample)."""
    found = re.search(rf"^{name}_sum{{{re.escape(labels)}}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0
