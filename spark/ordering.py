"""Out-of-order deliveries: a consumer's first receipt of a uid whose sequence number is lower than
one it already received from the same producer (scope ``producer``), or from the same producer
with the same key (scope ``key``). Repeats are duplicates, not reorders, so only first receipts
count; each message that arrives late counts once."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
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
    for scope, extra in (("producer", []), ("key", ["key"])):
        keys = ["client", "topic", "subscription", "producer", *extra]
        earlier = (
            Window.partitionBy(*keys).orderBy("ts", "sequence").rowsBetween(Window.unboundedPreceding, -1)
        )
        scoped = sequenced.where(F.col("key").isNotNull()) if extra else sequenced
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
    return found[0].unionByName(found[1])
