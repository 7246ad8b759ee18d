"""What each logical subscription received: duplicates, losses, out-of-order deliveries.

- duplicate: a uid received more than once by one subscription (over all regions): a
  same-region redelivery when the repeat came from the region of the first receipt, a
  cross-region failover duplicate otherwise;
- loss: a uid acknowledged to its producer (``send_ok``) that a subscription which ran to the
  end (still receiving after the last acknowledged send of its topic) never received;
- out of order: a first receipt whose sequence number is lower than one already received from
  the same producer (or, per key, with the same key) by the same consumer.

A uid is ``<producer>:<sequence>``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F


def _receives(events: DataFrame) -> DataFrame:
    return events.where((F.col("event") == "receive") & F.col("uid").isNotNull())


def duplicates(events: DataFrame) -> DataFrame:
    receives = _receives(events)
    first = Window.partitionBy("subscription", "uid").orderBy("ts")
    ranked = receives.withColumn("n", F.row_number().over(first)).withColumn(
        "first_cluster", F.first("cluster").over(first)
    )
    repeats = ranked.where(F.col("n") > 1)
    return repeats.select(
        "subscription",
        "topic",
        "uid",
        "cluster",
        "first_cluster",
        "ts",
        F.when(F.col("cluster") == F.col("first_cluster"), "same_region")
        .otherwise("cross_region")
        .alias("kind"),
    )


def losses(events: DataFrame) -> DataFrame:
    acked = events.where((F.col("event") == "send_ok") & F.col("uid").isNotNull()).select("topic", "uid")
    last_ack = acked.join(
        events.where(F.col("event") == "send_ok").groupBy("topic").agg(F.max("ts").alias("last_ok")), "topic"
    )
    subscriptions = (
        events.where(F.col("subscription").isNotNull())
        .groupBy("topic", "subscription")
        .agg(F.max("ts").alias("last_seen"))
    )
    ended = subscriptions.join(last_ack.select("topic", "last_ok").distinct(), "topic").where(
        F.col("last_seen") >= F.col("last_ok")
    )
    expected = acked.join(ended.select("topic", "subscription"), "topic")
    received = _receives(events).select("subscription", "uid").distinct()
    return expected.join(received, ["subscription", "uid"], "left_anti").select(
        "subscription", "topic", "uid"
    )


def reorders(events: DataFrame) -> DataFrame:
    first_receipts = (
        _receives(events)
        .withColumn("n", F.row_number().over(Window.partitionBy("subscription", "uid").orderBy("ts")))
        .where(F.col("n") == 1)
        .withColumn("producer", F.regexp_extract("uid", r"^(.*):\d+$", 1))
        .withColumn("sequence", F.regexp_extract("uid", r":(\d+)$", 1).cast("long"))
    )
    found = []
    for scope, keys in (("producer", ["client", "producer"]), ("key", ["client", "producer", "key"])):
        window = Window.partitionBy(*keys).orderBy("ts").rowsBetween(Window.unboundedPreceding, -1)
        marked = first_receipts.withColumn("highest_before", F.max("sequence").over(window))
        found.append(
            marked.where(F.col("sequence") < F.col("highest_before")).select(
                F.lit(scope).alias("scope"),
                "subscription",
                "client",
                "uid",
                "key",
                "sequence",
                "highest_before",
            )
        )
    return found[0].unionByName(found[1])
