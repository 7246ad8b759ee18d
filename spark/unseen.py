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


def unseen(deliveries: DataFrame) -> DataFrame:
    """topic, subscription, second, unseen: a row for each second in which the count changed
    (``deliveries``: see receipts)."""
    paired = deliveries.where(F.col("expected"))
    # each message's +1 and, once received, its -1, from one pass over the join (a union of two
    # selects of it would plan the join twice)
    step = F.struct(F.col("ts").alias("ts"), F.lit(1).alias("delta"))
    back = F.when(
        F.col("received").isNotNull(),
        F.struct(F.greatest("ts", "received").alias("ts"), F.lit(-1).alias("delta")),
    )
    steps = (
        paired.select(*SUBSCRIPTION, F.explode(F.array(step, back)).alias("step"))
        .where(F.col("step").isNotNull())
        .select(*SUBSCRIPTION, "step.ts", "step.delta")
    )
    per_second = steps.groupBy(
        *SUBSCRIPTION, F.floor(F.col("ts") / BUCKET_NS).cast("long").alias("second")
    ).agg(F.sum("delta").alias("change"))
    running = Window.partitionBy(*SUBSCRIPTION).orderBy("second").rowsBetween(Window.unboundedPreceding, 0)
    return per_second.select(
        *SUBSCRIPTION, "second", F.sum("change").over(running).cast("long").alias("unseen")
    )
