"""summary.json: the headline numbers of a post-mortem, versioned (``schema``) and with stable keys.

Within ``magnetar.postmortem/v1`` keys are only ever added. Window percentiles are exact
(nearest rank over every window: windows are few); latency percentiles come from Spark's
``percentile_approx``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from magnetar.spark.checkers.verdicts import NAMES as CHECKERS
from magnetar.spark.journal import Fault
from magnetar.spark.schema import SUMMARY_SCHEMA

#: how many example uids (and bad lines) a summary lists
EXAMPLES = 10
KINDS = ("producer", "consumer", "topic")


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(p * len(ordered)) - 1)])


def stats(values: Sequence[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "p50_ms": round(percentile(values, 0.5), 3),
        "p99_ms": round(percentile(values, 0.99), 3),
        "max_ms": round(max(values, default=0.0), 3),
    }


def summarize(
    *,
    run: str,
    run_dir: str,
    threshold_ms: float,
    files: int,
    lines: int,
    events: int,
    journal_found: bool,
    faults: list[Fault],
    windows: Sequence[Mapping[str, Any]],
    gaps: Sequence[Mapping[str, Any]],
    duplicates: DataFrame,
    losses: DataFrame,
    reorders: DataFrame,
    findings: DataFrame,
    latency: Sequence[Mapping[str, Any]],
    bad_lines: DataFrame,
    bad: int,
) -> dict[str, Any]:
    """The small tables (windows, gaps, latency) come as rows, the others as Spark tables."""
    window_rows = windows
    longest: dict[str, float] = {}
    for gap in gaps:
        longest[gap["fault"]] = max(gap["gap_ms"], longest.get(gap["fault"], gap["gap_ms"]))
    duplicate_part = _duplicates(duplicates)
    loss_part = _losses(losses)
    # the counts and the first examples in one query (each query on a table costs its jobs)
    reorder_parts = reorders.groupBy("scope").agg(F.count("*").alias("n"), _firsts("ts", "uid")).collect()
    reorder_counts = {r["scope"]: r["n"] for r in reorder_parts}
    checker_part = _checkers(findings)
    all_durations = [r["duration_ms"] for r in window_rows]
    fault_part = [_fault(f, window_rows, longest.get(f.name, 0.0)) for f in faults]
    return {
        "schema": SUMMARY_SCHEMA,
        "run": run,
        "run_dir": run_dir,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "threshold_ms": threshold_ms,
        "input": {
            "files": files,
            "lines": lines,
            "events": events,
            "bad_lines": bad,
            "journal": journal_found,
        },
        "headline": {
            "events": events,
            "faults": len(faults),
            "windows": len(window_rows),
            "window_p50_ms": stats(all_durations)["p50_ms"],
            "window_p99_ms": stats(all_durations)["p99_ms"],
            "window_max_ms": stats(all_durations)["max_ms"],
            "max_unavailability_ms": round(
                max((f["max_unavailability_ms"] for f in fault_part), default=0.0), 3
            ),
            "duplicates_same_region": duplicate_part["same_region"],
            "duplicates_cross_region": duplicate_part["cross_region"],
            "redeliveries_after_ack": duplicate_part["after_ack"],
            "losses": loss_part["count"],
            "reorders_producer": reorder_counts.get("producer", 0),
            "reorders_key": reorder_counts.get("key", 0),
            "reorders_partition": reorder_counts.get("partition", 0),
            "bad_lines": bad,
            **{headline_key(name): checker_part[name]["count"] for name in CHECKERS},
        },
        "windows": {
            **{kind: stats([r["duration_ms"] for r in window_rows if r["kind"] == kind]) for kind in KINDS},
            "open": sum(1 for r in window_rows if r["open"]),
            "unattributed": sum(1 for r in window_rows if r["fault"] == "none"),
        },
        "faults": fault_part,
        "duplicates": duplicate_part,
        "losses": loss_part,
        "reorders": {
            "producer": reorder_counts.get("producer", 0),
            "key": reorder_counts.get("key", 0),
            "partition": reorder_counts.get("partition", 0),
            "examples": _merged([r["first"] for r in reorder_parts if r["scope"] == "producer"]),
        },
        "checkers": checker_part,
        "latency": [
            {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != "position"}
            for r in sorted(latency, key=lambda r: (r["position"], r["measure"]))
        ],
        "bad_lines": {
            "count": bad,
            "examples": [r.asDict() for r in bad_lines.orderBy("file", "line").limit(EXAMPLES).collect()],
        },
    }


def headline_key(checker: str) -> str:
    """The headline's key for a checker's count: ``checker_lost_write`` for lost-write."""
    return "checker_" + checker.replace("-", "_")


def _checkers(findings: DataFrame) -> dict[str, Any]:
    """Per checker: how many findings, how many per fault, and the first findings' message ids."""
    grouped = (
        findings.groupBy("checker", "fault")
        .agg(
            F.count("*").alias("count"),
            F.slice(
                F.sort_array(F.collect_list(F.struct("ts", F.col("uids")[0].alias("uid")))), 1, EXAMPLES
            ).alias("first"),
        )
        .collect()
    )
    part: dict[str, Any] = {name: {"count": 0, "by_fault": {}, "examples": []} for name in CHECKERS}
    for r in sorted(grouped, key=lambda r: (r["checker"], r["fault"])):
        entry = part.setdefault(r["checker"], {"count": 0, "by_fault": {}, "examples": []})
        entry["count"] += r["count"]
        entry["by_fault"][r["fault"]] = r["count"]
        entry["examples"] = [(f["ts"], f["uid"]) for f in r["first"]] + entry["examples"]
    for entry in part.values():
        entry["examples"] = [uid for _, uid in sorted(entry["examples"])[:EXAMPLES]]
    return part


def _fault(fault: Fault, window_rows: Iterable[Any], longest_gap: float) -> dict[str, Any]:
    mine = [r for r in window_rows if r["fault"] == fault.name]
    return {
        "name": fault.name,
        "phase": fault.phase,
        "status": fault.status,
        "start_ns": fault.start_ns,
        "end_ns": fault.end_ns,
        "duration_ms": round((fault.end_ns - fault.start_ns) / 1e6, 3),
        "windows": stats([r["duration_ms"] for r in mine]),
        "windows_by_kind": {kind: sum(1 for r in mine if r["kind"] == kind) for kind in KINDS},
        "max_unavailability_ms": round(longest_gap, 3),
    }


def _firsts(ts: str, column: str) -> Column:
    """A group's first EXAMPLES (``ts``, ``column``) pairs, in that order: merged over the groups
    (see _merged), the first EXAMPLES of the whole table."""
    return F.slice(F.sort_array(F.collect_list(F.struct(ts, column))), 1, EXAMPLES).alias("first")


def _merged(groups: Iterable[Sequence[Any]]) -> list[str]:
    """The first EXAMPLES values over the groups' _firsts, as ordered by (ts, value)."""
    pairs = sorted((pair[0], pair[1]) for first in groups for pair in first)
    return [value for _, value in pairs[:EXAMPLES]]


def _duplicates(duplicates: DataFrame) -> dict[str, Any]:
    grouped = (
        duplicates.groupBy("topic", "subscription", "kind")
        .agg(
            F.count("*").alias("count"),
            F.slice(F.sort_array(F.collect_set("uid")), 1, EXAMPLES).alias("examples"),
            F.sum(F.col("after_ack").cast("long")).alias("after_ack"),
        )
        .orderBy("topic", "subscription", "kind")
        .collect()
    )
    subscriptions: dict[tuple[str, str], dict[str, Any]] = {}
    for r in grouped:
        entry = subscriptions.setdefault(
            (r["topic"], r["subscription"]),
            {
                "topic": r["topic"],
                "subscription": r["subscription"],
                "same_region": 0,
                "cross_region": 0,
                "examples": {},
            },
        )
        entry[r["kind"]] = r["count"]
        entry["examples"][r["kind"]] = list(r["examples"])
    return {
        "same_region": sum(e["same_region"] for e in subscriptions.values()),
        "cross_region": sum(e["cross_region"] for e in subscriptions.values()),
        "after_ack": sum(r["after_ack"] for r in grouped),
        "by_subscription": list(subscriptions.values()),
    }


def _losses(losses: DataFrame) -> dict[str, Any]:
    grouped = (
        losses.groupBy("topic", "subscription")
        .agg(
            F.count("*").alias("count"),
            F.slice(F.sort_array(F.collect_list("uid")), 1, EXAMPLES).alias("examples"),
            _firsts("acked_ts", "uid"),
        )
        .orderBy("topic", "subscription")
        .collect()
    )
    return {
        "count": sum(r["count"] for r in grouped),
        "examples": _merged(r["first"] for r in grouped),
        "by_subscription": [
            {
                "topic": r["topic"],
                "subscription": r["subscription"],
                "count": r["count"],
                "examples": list(r["examples"]),
            }
            for r in grouped
        ],
    }
