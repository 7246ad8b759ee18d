"""Losses: a uid acknowledged to its producer (``send_ok``) that a subscription which ran to the
end never received.

A subscription ran to the end when one of its consumers still logged something (a receive, an
ack, a disconnect) at or after its topic's last acknowledged send, or within the last
``TAIL_NS`` of the run (a consumer that drained and found the last messages missing), or when
``run.json`` lists it. A consumer stopped early by the experiment does not make its subscription's
later messages "lost". Only messages acknowledged after the subscription first appears in the log
are expected: Pulsar does not promise a new subscription what was published before it existed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from magnetar.common.run_directory import ExpectedSubscription
from magnetar.spark.literal_table import literal_table
from magnetar.spark.receipts import SUBSCRIPTION

TAIL_NS = 5_000_000_000


def finished_subscriptions(
    spark: SparkSession,
    lives: DataFrame,
    acked: DataFrame,
    expected: list[ExpectedSubscription],
    run_end: int,
) -> DataFrame:
    """topic, subscription, since: the subscriptions that ran to the end (``run_end``: the last
    event's ts), and when each began; ``lives``: the first and last event of every role, client,
    topic and subscription (see windows.lifetimes), from which a subscription's consumers' are
    cut without reading the log again."""
    seen = (
        lives.where((F.col("role") == "consumer") & F.col("subscription").isNotNull())
        .groupBy(*SUBSCRIPTION)
        .agg(F.min("begin").alias("since"), F.max("end").alias("last_seen"))
    )
    last_ack = acked.groupBy("topic").agg(F.max("ts").alias("last_ack"))
    ran = seen.join(last_ack, "topic", "left").where(
        (F.col("last_seen") >= F.coalesce("last_ack", F.lit(0)))
        | (F.col("last_seen") >= F.lit(run_end - TAIL_NS))
    )
    ran = ran.select(*SUBSCRIPTION, "since")
    if expected:
        listed = literal_table(
            spark,
            [("topic", "string"), ("subscription", "string")],
            [(s.topic, s.subscription) for s in expected],
        )
        # listed subscriptions expect everything (they may never have logged anything)
        ran = ran.join(listed, SUBSCRIPTION, "full").select(
            *SUBSCRIPTION, F.coalesce("since", F.lit(0)).alias("since")
        )
    return ran


def losses(deliveries: DataFrame) -> DataFrame:
    """topic, subscription, uid, acked_ts: acknowledged and never received (``deliveries``: see
    receipts)."""
    lost = deliveries.where(F.col("expected") & F.col("received").isNull())
    return lost.select(*SUBSCRIPTION, "uid", F.col("ts").alias("acked_ts"))
