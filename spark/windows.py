"""Disruption windows (DESIGN §6), each attributed to a fault.

- producer: a maximal interval with at least one send outstanding and no send acknowledged,
  longer than the threshold: between two consecutive ``send_ok`` of a producer, when sends were
  outstanding after the first;
- consumer: an interval with messages available and none received: between two consecutive
  ``receive`` of a consumer, when its topic had a ``send_ok`` in the interval (so messages were
  available, yet none arrived);
- topic: the same over all consumers of the topic together.

A window goes to the fault whose activity overlaps it, else to the one that most closely
precedes it; windows before any fault are attributed to none ("baseline").
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from magnetar.spark.ingest import Fault


def producer_windows(events: DataFrame, threshold_ns: int) -> DataFrame:
    flow = events.where(F.col("event").isin("send", "send_ok")).select(
        "client", "topic", "ts", F.when(F.col("event") == "send", 1).otherwise(-1).alias("delta"), "event"
    )
    ordered = Window.partitionBy("client").orderBy("ts", F.desc("delta"))
    flow = flow.withColumn(
        "outstanding", F.sum("delta").over(ordered.rowsBetween(Window.unboundedPreceding, 0))
    ).withColumn(
        "last_ok",
        F.max(F.when(F.col("event") == "send_ok", F.col("ts"))).over(
            ordered.rowsBetween(Window.unboundedPreceding, -1)
        ),
    )
    # The first send after each acknowledgement: when nothing was outstanding at the
    # acknowledgement, the window opens only when the next send goes out.
    first_sends = (
        flow.where(F.col("event") == "send")
        .groupBy("client", "last_ok")
        .agg(F.min("ts").alias("first_send"))
        .withColumnRenamed("last_ok", "after_ok")
    )
    oks = flow.where(F.col("event") == "send_ok")
    by_client = Window.partitionBy("client").orderBy("ts")
    oks = oks.withColumn("previous_ok", F.lag("ts").over(by_client)).withColumn(
        "outstanding_after", F.lag("outstanding").over(by_client)
    )
    joined = oks.join(
        first_sends,
        (oks["client"] == first_sends["client"]) & (oks["previous_ok"] == first_sends["after_ok"]),
        "left",
    ).drop(first_sends["client"])
    opened = joined.withColumn(
        "start", F.when(F.col("outstanding_after") > 0, F.col("previous_ok")).otherwise(F.col("first_send"))
    )
    return opened.where(F.col("start").isNotNull() & (F.col("ts") - F.col("start") > threshold_ns)).select(
        F.lit("producer").alias("kind"), "client", "topic", "start", F.col("ts").alias("end")
    )


def consumer_windows(events: DataFrame, threshold_ns: int, *, per_topic: bool = False) -> DataFrame:
    receives = events.where(F.col("event") == "receive")
    key = "topic" if per_topic else "client"
    by = Window.partitionBy(key).orderBy("ts")
    gaps = receives.withColumn("start", F.lag("ts").over(by)).where(
        F.col("start").isNotNull() & (F.col("ts") - F.col("start") > threshold_ns)
    )
    gaps = (
        gaps.select(key, "topic", "start", F.col("ts").alias("end"))
        if not per_topic
        else gaps.select("topic", "start", F.col("ts").alias("end"))
    )
    published = events.where(F.col("event") == "send_ok").select(
        F.col("topic").alias("p_topic"), F.col("ts").alias("p_ts")
    )
    joined = gaps.join(
        published,
        (gaps["topic"] == published["p_topic"])
        & (published["p_ts"] > gaps["start"])
        & (published["p_ts"] < gaps["end"]),
        "left_semi",
    )
    if per_topic:
        return joined.select(
            F.lit("topic").alias("kind"), F.col("topic").alias("client"), "topic", "start", "end"
        )
    return joined.select(F.lit("consumer").alias("kind"), "client", "topic", "start", "end")


def attribute(spark: SparkSession, windows: DataFrame, faults: list[Fault]) -> DataFrame:
    """Add ``fault``: the fault overlapping the window, else the one most closely preceding."""
    if not faults:
        return windows.withColumn("fault", F.lit("baseline"))
    table = spark.createDataFrame(
        [(f.name, f.start_ns, f.end_ns) for f in faults], "fault string, f_start long, f_end long"
    )
    candidates = windows.join(table, table["f_start"] <= windows["end"], "left")
    ranked = candidates.withColumn("overlaps", (F.col("f_end") >= F.col("start")).cast("int")).withColumn(
        "rank",
        F.row_number().over(
            Window.partitionBy("kind", "client", "start", "end").orderBy(
                F.desc("overlaps"), F.desc("f_start")
            )
        ),
    )
    return (
        ranked.where(F.col("rank") == 1)
        .select(
            "kind", "client", "topic", "start", "end", F.coalesce("fault", F.lit("baseline")).alias("fault")
        )
        .withColumn("duration_ms", (F.col("end") - F.col("start")) / 1e6)
    )


def all_windows(
    spark: SparkSession, events: DataFrame, faults: list[Fault], threshold_ms: float
) -> DataFrame:
    threshold_ns = int(threshold_ms * 1e6)
    windows = (
        producer_windows(events, threshold_ns)
        .unionByName(consumer_windows(events, threshold_ns))
        .unionByName(consumer_windows(events, threshold_ns, per_topic=True))
    )
    return attribute(spark, windows, faults)
