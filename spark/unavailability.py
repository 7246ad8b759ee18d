"""Maximum unavailability per fault: the longest gap between consecutive successful operations
(``send_ok`` or receive, by any client) on one topic, among the gaps attributed to the fault
(overlapping it, or following it before the next fault; see attribution)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from magnetar.spark.attribution import fault_of
from magnetar.spark.journal import Fault


def gaps(events: DataFrame, faults: list[Fault], shortest_ns: int) -> DataFrame:
    """fault, topic, start, end, gap_ms: gaps longer than ``shortest_ns`` (shorter ones never win)."""
    ok = events.where(F.col("event").isin("send_ok", "receive") & F.col("topic").isNotNull()).select(
        "topic", "ts"
    )
    following = Window.partitionBy("topic").orderBy("ts")
    spaced = ok.withColumn("start", F.lag("ts").over(following)).where(
        F.col("start").isNotNull() & (F.col("ts") - F.col("start") > shortest_ns)
    )
    return spaced.select(
        fault_of(F.col("start"), F.col("ts"), faults).alias("fault"),
        "topic",
        "start",
        F.col("ts").alias("end"),
        ((F.col("ts") - F.col("start")) / 1e6).alias("gap_ms"),
    )
