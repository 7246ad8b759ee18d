"""Duplicates: a uid received more than once by one logical subscription (over all regions).

Every receipt after the first is one duplicate: a same-region redelivery when it came from the
region of the first receipt (a reconnect, a redelivery after a missing ack), a cross-region
failover duplicate when it came from another region (the subscription moved before its
replicated position caught up).

A repeat is ``after_ack`` when the consumer had acknowledged the message at least ``ACK_GRACE_NS``
before the last new message it received ahead of the repeat: the broker had that acknowledgement
long enough to persist it while the consumer was still being served, so the redelivery means an
acknowledgement was lost, not that one was in flight. (Acknowledgements still in flight when a
connection drops, in the client's ack grouping or the cursor's flush interval, are redelivered
by design: at-least-once.)"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from magnetar.spark.receipts import SUBSCRIPTION

SAME_REGION, CROSS_REGION = "same_region", "cross_region"
#: how long before the consumer's last new receipt an acknowledgement counts as given, not in
#: flight: well over the client's ack grouping (100 ms) and the cursor's flush interval (100 ms)
ACK_GRACE_NS = 1_000_000_000


def duplicates(numbered: DataFrame, events: DataFrame) -> DataFrame:
    """Every repeat receipt: topic, subscription, uid, client, cluster, first_cluster, ts, repeat,
    kind, after_ack."""
    earlier = (
        Window.partitionBy(*SUBSCRIPTION, "client").orderBy("ts").rowsBetween(Window.unboundedPreceding, -1)
    )
    with_last_new = numbered.withColumn("last_new", F.max(F.when(F.col("n") == 1, F.col("ts"))).over(earlier))
    # only the repeated messages' acknowledgements: every acknowledgement is tested against the
    # few repeated messages (a broadcast), not aggregated, shuffled and sorted to join them
    repeated = numbered.where(F.col("n") > 1).select(*SUBSCRIPTION, "uid").distinct()
    acks = (
        events.where((F.col("event") == "ack") & F.col("uid").isNotNull())
        .join(F.broadcast(repeated), [*SUBSCRIPTION, "uid"], "left_semi")
        .groupBy(*SUBSCRIPTION, "uid")
        .agg(F.min("ts").alias("acked"))
    )
    repeats = with_last_new.where(F.col("n") > 1).join(acks, [*SUBSCRIPTION, "uid"], "left")
    given = F.col("acked").isNotNull() & (F.col("acked") <= F.col("last_new") - ACK_GRACE_NS)
    return repeats.select(
        "topic",
        "subscription",
        "uid",
        "client",
        "cluster",
        "first_cluster",
        "ts",
        (F.col("n") - 1).alias("repeat"),
        F.when(F.col("cluster") == F.col("first_cluster"), SAME_REGION).otherwise(CROSS_REGION).alias("kind"),
        F.coalesce(given, F.lit(False)).alias("after_ack"),
    )
