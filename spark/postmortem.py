"""The whole post-mortem of one run directory: Parquet tables, summary.json, report.html."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from magnetar.spark import deliveries, report, timing, windows
from magnetar.spark.ingest import BadInputError, read_events, read_faults
from magnetar.spark.schema import SUMMARY_SCHEMA

EXAMPLES = 10


def run(
    run_dir: Path,
    spark: SparkSession,
    *,
    threshold_ms: float = 50.0,
    out: Path | None = None,
    on_status: Any = lambda _msg: None,
) -> dict[str, Any]:
    if not run_dir.is_dir():
        raise BadInputError(f"run directory {run_dir} does not exist")
    out = out or run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    on_status("reading events and journal")
    events, bad_lines = read_events(spark, run_dir)
    events = events.cache()
    faults = read_faults(run_dir)
    on_status("disruption windows")
    window_df = windows.all_windows(spark, events, faults, threshold_ms).cache()
    on_status("duplicates, losses, reorders")
    duplicate_df = deliveries.duplicates(events).cache()
    loss_df = deliveries.losses(events).cache()
    reorder_df = deliveries.reorders(events).cache()
    on_status("latency and throughput")
    latency_df = timing.latency(events, faults)
    throughput_df = timing.throughput(events).cache()
    unavailable = timing.max_unavailability(events, faults)

    tables = {
        "windows": window_df,
        "duplicates": duplicate_df,
        "losses": loss_df,
        "reorders": reorder_df,
        "latency": latency_df,
        "throughput": throughput_df,
    }
    on_status("writing Parquet tables")
    for name, frame in tables.items():
        frame.write.mode("overwrite").parquet(str(out / f"{name}.parquet"))

    summary = _summary(
        run_dir,
        events,
        faults,
        window_df,
        duplicate_df,
        loss_df,
        reorder_df,
        latency_df,
        unavailable,
        bad_lines,
        threshold_ms,
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    on_status("rendering report.html")
    (out / "report.html").write_text(report.render(summary, _details(throughput_df, window_df, faults)))
    events.unpersist()
    return summary


def _summary(
    run_dir: Path,
    events: DataFrame,
    faults: list[Any],
    window_df: DataFrame,
    duplicate_df: DataFrame,
    loss_df: DataFrame,
    reorder_df: DataFrame,
    latency_df: DataFrame,
    unavailable: dict[str, float],
    bad_lines: list[Any],
    threshold_ms: float,
) -> dict[str, Any]:
    stats = window_df.agg(
        F.count("*").alias("n"),
        F.percentile_approx("duration_ms", 0.5).alias("p50"),
        F.percentile_approx("duration_ms", 0.99).alias("p99"),
        F.max("duration_ms").alias("max"),
    ).collect()[0]
    per_fault = {
        r["fault"]: r
        for r in window_df.groupBy("fault")
        .agg(
            F.count("*").alias("n"),
            F.percentile_approx("duration_ms", 0.5).alias("p50"),
            F.percentile_approx("duration_ms", 0.99).alias("p99"),
            F.max("duration_ms").alias("max"),
        )
        .collect()
    }
    duplicate_groups = (
        duplicate_df.groupBy("subscription", "kind")
        .agg(F.count("*").alias("count"), F.slice(F.collect_list("uid"), 1, EXAMPLES).alias("examples"))
        .collect()
    )
    loss_groups = (
        loss_df.groupBy("subscription")
        .agg(
            F.count("*").alias("count"),
            F.slice(F.sort_array(F.collect_list("uid")), 1, EXAMPLES).alias("examples"),
        )
        .collect()
    )
    same = sum(r["count"] for r in duplicate_groups if r["kind"] == "same_region")
    cross = sum(r["count"] for r in duplicate_groups if r["kind"] == "cross_region")
    losses = sum(r["count"] for r in loss_groups)
    return {
        "schema": SUMMARY_SCHEMA,
        "run": run_dir.name,
        "threshold_ms": threshold_ms,
        "headline": {
            "events": events.count(),
            "faults": len(faults),
            "windows": stats["n"],
            "window_p50_ms": stats["p50"] or 0.0,
            "window_p99_ms": stats["p99"] or 0.0,
            "window_max_ms": stats["max"] or 0.0,
            "duplicates_same_region": same,
            "duplicates_cross_region": cross,
            "losses": losses,
            "reorders": reorder_df.where(F.col("scope") == "producer").count(),
            "bad_lines": len(bad_lines),
        },
        "faults": [
            {
                "name": f.name,
                "start_ns": f.start_ns,
                "end_ns": f.end_ns,
                "windows": per_fault[f.name]["n"] if f.name in per_fault else 0,
                "p50_ms": per_fault[f.name]["p50"] if f.name in per_fault else 0.0,
                "p99_ms": per_fault[f.name]["p99"] if f.name in per_fault else 0.0,
                "max_ms": per_fault[f.name]["max"] if f.name in per_fault else 0.0,
                "max_unavailability_ms": unavailable.get(f.name, 0.0),
            }
            for f in faults
        ],
        "latency": [r.asDict() for r in latency_df.orderBy("measure", "phase").collect()],
        "duplicates": [
            {
                "subscription": r["subscription"],
                "kind": r["kind"],
                "count": r["count"],
                "examples": list(r["examples"]),
            }
            for r in duplicate_groups
        ],
        "losses": [
            {"subscription": r["subscription"], "count": r["count"], "examples": list(r["examples"])}
            for r in loss_groups
        ],
        "bad_lines": [asdict(b) for b in bad_lines],
    }


def _details(throughput_df: DataFrame, window_df: DataFrame, faults: list[Any]) -> dict[str, Any]:
    series: dict[str, list[dict[str, Any]]] = {}
    for row in throughput_df.orderBy("topic", "second").collect():
        series.setdefault(row["topic"], []).append(row.asDict())
    window_rows = [r.asDict() for r in window_df.orderBy(F.desc("duration_ms")).limit(500).collect()]
    fault_rows = [{"name": f.name, "start_ns": f.start_ns, "end_ns": f.end_ns} for f in faults]
    timelines = [
        report.timeline(
            topic,
            points,
            fault_rows,
            [w for w in window_rows if w["topic"] == topic and w["kind"] == "topic"],
        )
        for topic, points in sorted(series.items())[:8]
    ]
    return {"timelines": timelines, "windows": window_rows}
