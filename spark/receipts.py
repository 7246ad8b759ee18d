"""Receipts of messages by logical subscriptions.

A logical subscription is a topic and a subscription name, over every region: a replicated
subscription that fails over from one cluster to another is still one subscription, and the uid
(producer id and sequence, carried in a message property) is the same in every region.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

SUBSCRIPTION = ["topic", "subscription"]
#: what the tables and checkers made from receipts read of them: the receipts are sorted and kept
#: in memory with these columns only (a receive's role, event and latency are not among them)
RECEIPT = [
    "ts",
    "client",
    "cluster",
    "topic",
    "subscription",
    "uid",
    "key",
    "msg_id",
    "partition",
    "digest",
    "redelivery",
]


def receives(events: DataFrame) -> DataFrame:
    """Receive events that carry a uid (a message without one cannot be followed)."""
    return events.where((F.col("event") == "receive") & F.col("uid").isNotNull())


def numbered_receives(events: DataFrame) -> DataFrame:
    """Receives with ``n``: 1 for a subscription's first receipt of a uid, 2 for its first repeat, ...;
    and ``first_cluster``, the region of the first receipt."""
    # the uid first: the receipts are sorted by these keys, and the sort compares rows by their
    # first key's leading bytes before it compares whole rows; a topic's (persistent://public/...)
    # are every row's, a uid's tell most rows apart
    by_uid = Window.partitionBy("uid", *SUBSCRIPTION).orderBy("ts", "cluster", "client")
    return (
        receives(events)
        .select(*RECEIPT)
        .withColumn("n", F.row_number().over(by_uid))
        .withColumn("first_cluster", F.first("cluster").over(by_uid))
    )


def first_receipts(numbered: DataFrame) -> DataFrame:
    return numbered.where(F.col("n") == 1).drop("n", "first_cluster")


def acknowledged(events: DataFrame) -> DataFrame:
    """One row per uid a producer saw acknowledged (send_ok): topic, uid, ts.

    Only the time is aggregated: a string in the aggregation (a message's key, say) would make
    Spark sort every acknowledgement, twice, where a hash aggregation does."""
    oks = events.where((F.col("event") == "send_ok") & F.col("uid").isNotNull())
    return oks.groupBy("topic", "uid").agg(F.min("ts").alias("ts"))


def deliveries(acked: DataFrame, firsts: DataFrame, finished: DataFrame) -> DataFrame:
    """Every acknowledged message beside each subscription of its topic (every subscription that
    received something, and every one that ran to the end: ``finished``, see losses): topic,
    subscription, uid, ts (its acknowledgement), received (the subscription's first receipt of it,
    null if none) and expected (the subscription ran to the end and had begun by ``ts``).

    One join of the acknowledgements with the first receipts, from which the availability steps
    (see windows), the losses and the unseen messages are all cut: each used to join the two
    itself, a sort of every acknowledgement and every receipt apiece."""
    ran = finished.groupBy(*SUBSCRIPTION).agg(F.min("since").alias("since"))
    receiving = firsts.select(*SUBSCRIPTION).distinct().join(ran, SUBSCRIPTION, "left_anti")
    subscriptions = ran.withColumn("ran", F.lit(True)).unionByName(
        receiving.select(*SUBSCRIPTION, F.lit(None).cast("long").alias("since"), F.lit(False).alias("ran"))
    )
    received = firsts.select(*SUBSCRIPTION, "uid", F.col("ts").alias("received"))
    return (
        acked.join(F.broadcast(subscriptions), "topic")
        .join(received, [*SUBSCRIPTION, "uid"], "left")
        .select(
            *SUBSCRIPTION,
            "uid",
            "ts",
            "received",
            F.coalesce(F.col("ran") & (F.col("ts") >= F.col("since")), F.lit(False)).alias("expected"),
        )
    )
