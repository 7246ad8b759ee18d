"""inconsistent-offsets: one message, two payloads; or one position, two messages.

- by message: a subscription received a uid whose payload digest differs from the one its producer
  sent (or, when the producer logged none, from the subscription's first receipt of it); one
  finding per subscription and uid, dated by the first wrong receipt;
- by position: one message id (``ledger:entry:partition:batch`` in one cluster's topic) delivered
  as two or more uids, to any subscriptions; one finding per position, dated by the first receipt
  of its second uid.

Receipts are compared, not the producer's ``msg_id``: a batched send's acknowledgement may name the
batch, not the message. Lines without a digest (version 1) are not judged by message.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from magnetar.spark.checkers.finding import finding

NAME = "inconsistent-offsets"


def find(numbered: DataFrame, events: DataFrame) -> DataFrame:
    return _by_message(numbered, events).unionByName(_by_position(numbered))


def _by_message(numbered: DataFrame, events: DataFrame) -> DataFrame:
    sent = (
        events.where(
            F.col("event").isin("send", "send_ok", "send_err")
            & F.col("uid").isNotNull()
            & F.col("digest").isNotNull()
        )
        .groupBy("topic", "uid")
        .agg(F.min_by("digest", "ts").alias("sent_digest"))
    )
    received = numbered.where(F.col("digest").isNotNull())
    first = Window.partitionBy("topic", "subscription", "uid").orderBy("ts", "client")
    judged = (
        received.join(sent, ["topic", "uid"], "left")
        .withColumn("truth", F.coalesce(F.col("sent_digest"), F.first("digest").over(first)))
        .where(F.col("digest") != F.col("truth"))
    )
    wrong = judged.groupBy("topic", "subscription", "uid").agg(
        F.min_by(F.struct("ts", "client", "digest", "truth"), "ts").alias("w")
    )
    detail = F.concat(F.lit("payload digest "), F.col("w.digest"), F.lit(", sent as "), F.col("w.truth"))
    return finding(
        wrong, NAME, uids=F.array("uid"), ts=F.col("w.ts"), client=F.col("w.client"), detail=detail
    )


#: a message's position: its id in one cluster's topic
POSITION = ("cluster", "topic", "msg_id")


def _clashing(placed: DataFrame) -> DataFrame:
    """The receipts of positions that hold two uids or more. Found by counting the uids of every
    position (two hash aggregations, no lists), so that the lists below are built for these few
    positions only, not for every message received."""
    uids = placed.select(*POSITION, "uid").distinct().groupBy(*POSITION).count()
    clashes = uids.where(F.col("count") > 1).drop("count")
    # null-safe: a position with no cluster is still one position, as in the grouping below
    same = [placed[key].eqNullSafe(clashes[key]) for key in POSITION]
    return placed.join(clashes, same, "left_semi")


def _by_position(numbered: DataFrame) -> DataFrame:
    placed = _clashing(numbered.where(F.col("msg_id").isNotNull()))
    per_uid = placed.groupBy("cluster", "topic", "msg_id", "uid").agg(
        F.min("ts").alias("ts"), F.collect_set("subscription").alias("subscriptions")
    )
    shared = per_uid.groupBy("cluster", "topic", "msg_id").agg(
        F.sort_array(F.collect_list(F.struct("ts", "uid"))).alias("seen"),
        F.array_distinct(F.flatten(F.collect_list("subscriptions"))).alias("subscriptions"),
    )
    clash = shared.where(F.size("seen") > 1)
    detail = F.concat(F.lit("one message id, "), F.size("seen").cast("string"), F.lit(" messages"))
    return finding(
        clash,
        NAME,
        subscription=F.array_join(F.sort_array("subscriptions"), ","),
        uids=F.sort_array(F.transform("seen", lambda s: s["uid"])),
        ts=F.col("seen")[1]["ts"],
        scope=F.concat(F.lit("position "), F.col("msg_id"), F.lit(" in "), F.col("cluster")),
        detail=detail,
    )
