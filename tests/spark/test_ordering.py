"""Reorders by scope on a partitioned topic: a producer's messages to different partitions may
arrive in any order (counted in the producer scope only); within a partition or a key they may
not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from magnetar.spark import ordering

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = "client string, topic string, subscription string, uid string, key string, partition int, ts long"


def test_partition_and_key_scopes_on_a_partitioned_topic(spark: SparkSession) -> None:
    # p:0 and p:2 went to partition 0 with key k0, p:1 and p:3 to partition 1 with key k1.
    # The consumer got partition 1's first (legal: across partitions), then p:2 after p:0 (in
    # order); p:3 came after p:1, in order too. Only the producer scope sees reorders.
    firsts = spark.createDataFrame(
        [
            ("c", "t", "s", "p:1", "k1", 1, 1),
            ("c", "t", "s", "p:3", "k1", 1, 2),
            ("c", "t", "s", "p:0", "k0", 0, 3),
            ("c", "t", "s", "p:2", "k0", 0, 4),
        ],
        COLUMNS,
    )
    found = {(r["scope"], r["uid"]) for r in ordering.reorders(firsts).collect()}
    assert found == {("producer", "p:0"), ("producer", "p:2")}

    # Within a partition, a late message is a reorder of the partition (and key) scope.
    late = spark.createDataFrame(
        [("c", "t", "s", "p:2", "k0", 0, 1), ("c", "t", "s", "p:0", "k0", 0, 2)],
        COLUMNS,
    )
    scopes = sorted(r["scope"] for r in ordering.reorders(late).collect())
    assert scopes == ["key", "partition", "producer"]


def test_a_non_partitioned_topic_has_no_partition_scope(spark: SparkSession) -> None:
    firsts = spark.createDataFrame(
        [("c", "t", "s", "p:2", None, -1, 1), ("c", "t", "s", "p:0", None, -1, 2)],
        COLUMNS,
    )
    assert [r["scope"] for r in ordering.reorders(firsts).collect()] == ["producer"]
