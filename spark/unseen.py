"""Unseen messages over time: per subscription that ran to the end (see losses), how many messages
were acknowledged to their producers and not yet received, at the end of each second.

A message counts from its acknowledgement (``send_ok``) until the subscription first receives it
(from its acknowledgement, if it arrived before its producer heard back); one never received
counts to the end, so a subscription's last value is its lost-write count. A fault that holds
messages back shows as a hump that drains after it; a loss, as a step that never drains.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from magnetar.spark.receipts import SUBSCRIPTION
from magnetar.spark.throughput import BUCKET_NS


def unseen(acked: DataFrame, finished: DataFrame, firsts: DataFrame) -> DataFrame:
    """topic, subscription, second, unseen: a row for each second in which the count changed."""
    expected = acked.join(finished, "topic").where(F.col("ts") >= F.col("since"))
    received = firsts.select(*SUBSCRIPTION, "uid", F.col("ts").alias("received"))
    paired = expected.join(received, [*SUBSCRIPTION, "uid"], "left")
    steps = paired.select(*SUBSCRIPTION, F.col("ts"), F.lit(1).alias("delta")).unionByName(
        paired.where(F.col("received").isNotNull()).select(
            *SUBSCRIPTION, F.greatest("ts", "received").alias("ts"), F.lit(-1).alias("delta")
        )
    )
    per_second = steps.groupBy(
        *SUBSCRIPTION, F.floor(F.col("ts") / BUCKET_NS).cast("long").alias("second")
    ).agg(F.sum("delta").alias("change"))
    running = Window.partitionBy(*SUBSCRIPTION).orderBy("second").rowsBetween(Window.unboundedPreceding, 0)
    return per_second.select(
        *SUBSCRIPTION, "second", F.sum("change").over(running).cast("long").alias("unseen")
    )
