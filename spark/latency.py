"""Publish latency (``send_ok``'s latency_ms) and end-to-end latency (``receive``'s latency_ms,
from the producer's timestamp) percentiles, before, during and after each fault."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from magnetar.spark.literal_table import literal_table
from magnetar.spark.phases import Phase

#: percentile_approx's accuracy: the rank error is at most 1/ACCURACY of the count
ACCURACY = 20_000
#: the percentiles reported, by column
PERCENTILES = {0.5: "p50_ms", 0.99: "p99_ms", 0.999: "p999_ms"}


def latency(spark: SparkSession, events: DataFrame, cuts: list[Phase]) -> DataFrame:
    measured = events.where(
        F.col("event").isin("send_ok", "receive") & F.col("latency_ms").isNotNull()
    ).select(
        F.when(F.col("event") == "send_ok", "publish").otherwise("end_to_end").alias("measure"),
        "ts",
        "latency_ms",
    )
    table = literal_table(
        spark,
        [
            ("fault", "string"),
            ("phase", "string"),
            ("position", "int"),
            ("p_start", "bigint"),
            ("p_end", "bigint"),
        ],
        [(p.fault, p.phase, i, p.start_ns, p.end_ns) for i, p in enumerate(cuts)],
    )
    within = measured.join(
        F.broadcast(table), (measured["ts"] >= table["p_start"]) & (measured["ts"] < table["p_end"])
    )
    # the three percentiles from one summary of each group, not three summaries built alike
    cut = F.percentile_approx("latency_ms", list(PERCENTILES), ACCURACY)
    grouped = within.groupBy("fault", "phase", "position", "measure").agg(
        F.count("*").alias("count"), cut.alias("cut"), F.max("latency_ms").alias("max_ms")
    )
    return grouped.select(
        "fault",
        "phase",
        "position",
        "measure",
        "count",
        *[F.col("cut")[i].alias(name) for i, name in enumerate(PERCENTILES.values())],
        "max_ms",
    )
