"""Out-of-order deliveries: a consumer's first receipt of a uid whose sequence number is lower than
one it already received from the same producer (scope ``producer``), from the same producer with
the same key (scope ``key``), or from the same producer in the same partition of a partitioned
topic (scope ``partition``). Repeats are duplicates, not reorders, so only first receipts count;
each message that arrives late counts once. On a partitioned topic only the key and partition
scopes are Pulsar's guarantee: a producer's messages to different partitions arrive in any order."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

UID = r"^(.*):(\d+)$"


def with_sequence(firsts: DataFrame) -> DataFrame:
    """producer and sequence, parsed from ``<producer>:<sequence>`` (uids of another shape are skipped)."""
    return (
        firsts.withColumn("producer", F.regexp_extract("uid", UID, 1))
        .withColumn("sequence", F.regexp_extract("uid", UID, 2))
        .where(F.col("sequence") != "")
        .withColumn("sequence", F.col("sequence").cast("long"))
    )


def reorders(firsts: DataFrame) -> DataFrame:
    sequenced = with_sequence(firsts)
    found = []
    scopes: tuple[tuple[str, list[str], Column], ...] = (
        ("producer", [], F.lit(True)),
        ("key", ["key"], F.col("key").isNotNull()),
        ("partition", ["partition"], F.col("partition") >= 0),
    )
    for scope, extra, applies in scopes:
        keys = ["client", "topic", "subscription", "producer", *extra]
        earlier = (
            Window.partitionBy(*keys).orderBy("ts", "sequence").rowsBetween(Window.unboundedPreceding, -1)
        )
        scoped = sequenced.where(applies)
        marked = scoped.withColumn("highest_before", F.max("sequence").over(earlier))
        found.append(
            marked.where(F.col("sequence") < F.col("highest_before")).select(
                F.lit(scope).alias("scope"),
                "topic",
                "subscription",
                "client",
                "producer",
                "uid",
                "key",
                "sequence",
                "highest_before",
                "ts",
            )
        )
    return found[0].unionByName(found[1]).unionByName(found[2])
