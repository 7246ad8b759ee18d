"""Latency percentiles before, during and after faults, and throughput over time."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from magnetar.spark.ingest import Fault


def phase_column(faults: list[Fault]) -> Column:
    """before the first fault, during any fault, after the last one (no faults: "baseline")."""
    if not faults:
        return F.lit("baseline")
    during = F.lit(False)
    for fault in faults:
        during = during | ((F.col("ts") >= fault.start_ns) & (F.col("ts") <= fault.end_ns))
    first, last = min(f.start_ns for f in faults), max(f.end_ns for f in faults)
    return (
        F.when(during, "during")
        .when(F.col("ts") < first, "before")
        .when(F.col("ts") > last, "after")
        .otherwise("between")
    )


def latency(events: DataFrame, faults: list[Fault]) -> DataFrame:
    measured = events.where(F.col("event").isin("send_ok", "receive") & F.col("latency_ms").isNotNull())
    measured = measured.withColumn(
        "measure", F.when(F.col("event") == "send_ok", "publish").otherwise("end_to_end")
    ).withColumn("phase", phase_column(faults))
    return measured.groupBy("measure", "phase").agg(
        F.count("*").alias("count"),
        F.percentile_approx("latency_ms", 0.5, 10000).alias("p50_ms"),
        F.percentile_approx("latency_ms", 0.99, 10000).alias("p99_ms"),
        F.percentile_approx("latency_ms", 0.999, 10000).alias("p999_ms"),
        F.max("latency_ms").alias("max_ms"),
    )


def throughput(events: DataFrame) -> DataFrame:
    counted = events.where(F.col("event").isin("send_ok", "receive"))
    return (
        counted.withColumn("second", (F.col("ts") / 1_000_000_000).cast("long"))
        .groupBy("topic", "second")
        .agg(
            F.sum(F.when(F.col("event") == "send_ok", 1).otherwise(0)).alias("published"),
            F.sum(F.when(F.col("event") == "receive", 1).otherwise(0)).alias("received"),
        )
    )


def max_unavailability(events: DataFrame, faults: list[Fault]) -> dict[str, float]:
    """Per fault: the longest gap between consecutive successful operations (send_ok or receive,
    per topic) that overlaps the fault's activity or follows it within 60 s."""
    from pyspark.sql import Window

    ok = events.where(F.col("event").isin("send_ok", "receive")).select("topic", "ts")
    gaps = ok.withColumn("start", F.lag("ts").over(Window.partitionBy("topic").orderBy("ts"))).where(
        F.col("start").isNotNull()
    )
    result: dict[str, float] = {}
    for fault in faults:
        near = gaps.where((F.col("ts") >= fault.start_ns) & (F.col("start") <= fault.end_ns + 60_000_000_000))
        row = near.agg(F.max(F.col("ts") - F.col("start")).alias("gap")).collect()[0]
        result[fault.name] = (row["gap"] or 0) / 1e6
    return result
