"""Throughput over time: acknowledged sends and receives per topic in one-second buckets."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

BUCKET_NS = 1_000_000_000


def throughput(events: DataFrame) -> DataFrame:
    counted = events.where(F.col("event").isin("send_ok", "receive") & F.col("topic").isNotNull())
    return (
        counted.withColumn("second", F.floor(F.col("ts") / BUCKET_NS).cast("long"))
        .groupBy("topic", "second")
        .agg(
            F.sum((F.col("event") == "send_ok").cast("long")).alias("published"),
            F.sum((F.col("event") == "receive").cast("long")).alias("received"),
        )
    )
