"""The ordered streams a subscription promises, and where each acknowledged message stands in its
stream.

A subscription's type (the ``sub_type`` its consumers log) says what order it promises:

- Exclusive and Failover: a producer's messages in order within each partition (a
  non-partitioned topic is one partition);
- Key_Shared: a producer's messages in order within each key;
- Shared: no order at all (and a log without ``sub_type``, version 1, promises none either: the
  checkers cannot know what to expect).

Order is a producer's: its uids carry its sequence numbers, and two producers' messages have no
order between them. A stream is therefore (topic, subscription, producer, scope), the scope being
``partition N`` or ``key K``; an acknowledged message's ``rank`` is its place among its
producer's acknowledged messages of that scope (1, 2, ...). A message whose send failed has no
rank: its receipt, if any, is not judged.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from magnetar.spark.ordering import with_sequence

#: the types that promise order, and the scope of their order
ORDERED = {"Exclusive": "partition", "Failover": "partition", "KeyShared": "key"}
#: a stream: the ordered run of one producer's messages that one subscription promises
STREAM = ["topic", "subscription", "producer", "scope"]


def subscription_types(events: DataFrame) -> DataFrame:
    """topic, subscription, sub_type: the type each subscription's consumers logged."""
    typed = events.where(F.col("sub_type").isNotNull() & F.col("subscription").isNotNull())
    return typed.groupBy("topic", "subscription").agg(F.max("sub_type").alias("sub_type"))


def promised(types: DataFrame) -> DataFrame:
    """topic, order: the scopes of order (``partition``, ``key``) some subscription of the topic
    promises; a small table (a row per topic and type)."""
    kinds = F.create_map(*[F.lit(x) for pair in ORDERED.items() for x in pair])
    return types.select("topic", kinds[F.col("sub_type")].alias("order")).where(F.col("order").isNotNull())


def ranked(events: DataFrame, types: DataFrame) -> DataFrame:
    """topic, uid, producer, scope, rank, ts: every acknowledged message once in its partition's
    stream and once (with a key) in its key's, for the topics whose subscriptions promise that
    order (``types``: see subscription_types). A stream no subscription promises is never judged,
    so it is not ranked: a log whose subscriptions promise no order sorts none of its sends."""
    oks = events.where((F.col("event") == "send_ok") & F.col("uid").isNotNull())
    # each send once for every order its topic's subscriptions promise (none: not at all)
    ordered = oks.join(F.broadcast(promised(types).distinct()), "topic")
    acked = with_sequence(
        ordered.groupBy("topic", "order", "uid").agg(
            F.min("ts").alias("ts"), F.max("key").alias("key"), F.max("partition").alias("partition")
        )
    )
    scope = F.when(F.col("order") == "partition", F.concat(F.lit("partition "), F.col("partition"))).when(
        F.col("order") == "key", F.concat(F.lit("key "), F.col("key"))
    )
    streams = acked.select("topic", "uid", "producer", "sequence", "ts", scope.alias("scope"))
    order = Window.partitionBy("topic", "producer", "scope").orderBy("sequence")
    return (
        streams.where(F.col("scope").isNotNull())
        .withColumn("rank", F.row_number().over(order))
        .select("topic", "uid", "producer", "scope", "rank", "ts")
    )


def ordered_receipts(numbered: DataFrame, types: DataFrame, ranks: DataFrame) -> DataFrame:
    """Every receipt (first or repeated) by a subscription that promises order, in its stream:
    topic, subscription, producer, scope, rank, uid, client, ts, redelivery."""
    kinds = F.create_map(*[F.lit(x) for pair in ORDERED.items() for x in pair])
    typed = (
        numbered.drop("sub_type")
        .join(F.broadcast(types), ["topic", "subscription"])
        .withColumn("order", kinds[F.col("sub_type")])
    )
    promised = typed.where(F.col("order").isNotNull())
    placed = promised.select("topic", "subscription", "uid", "client", "ts", "redelivery", "order").join(
        ranks.withColumnRenamed("ts", "acked_ts"), ["topic", "uid"]
    )
    return placed.where(F.col("scope").startswith(F.concat(F.col("order"), F.lit(" ")))).select(
        "topic", "subscription", "producer", "scope", "rank", "uid", "client", "ts", "redelivery"
    )
