"""poll-skip: a subscription that promises order (see streams) delivered a message of a stream
while earlier messages of that stream, which it had not delivered yet, were due first: it jumped
over them.

Over all the subscription's consumers (a failover hands the stream from one to another), in
receipt order: a receipt whose rank is more than one above the highest delivered before it skips
the ranks between. A seek on the subscription between the two receipts explains the jump. The
skipped messages are the finding's; it is dated by the receipt that jumped. A skipped message that
never comes is a lost-write as well; one that comes later, a nonmonotonic-poll as well (unless a
reconnection or redelivery explains the return).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from magnetar.spark.checkers.finding import finding
from magnetar.spark.checkers.streams import STREAM

NAME = "poll-skip"


def find(ordered: DataFrame, ranks: DataFrame, events: DataFrame) -> DataFrame:
    before = (
        Window.partitionBy(*STREAM).orderBy("ts", "rank", "client").rowsBetween(Window.unboundedPreceding, -1)
    )
    marked = ordered.withColumn("highest", F.max("rank").over(before)).withColumn(
        "previous_ts", F.max("ts").over(before)
    )
    jumps = marked.where(F.col("rank") > F.col("highest") + 1)
    seeks = events.where(F.col("event") == "seek").select(
        "topic", "subscription", F.col("ts").alias("seek_ts")
    )
    explained = (
        (jumps["topic"] == seeks["topic"])
        & (jumps["subscription"] == seeks["subscription"])
        & (seeks["seek_ts"] >= jumps["previous_ts"])
        & (seeks["seek_ts"] <= jumps["ts"])
    )
    unexplained = jumps.join(seeks, explained, "left_anti")
    jump = unexplained.select(
        *STREAM,
        "client",
        "ts",
        "highest",
        F.col("rank").alias("landed"),
        F.col("uid").alias("landed_uid"),
    )
    skipped = ranks.select(
        "topic", "producer", "scope", F.col("rank").alias("skipped_rank"), F.col("uid").alias("skipped_uid")
    )
    between = jump.join(skipped, ["topic", "producer", "scope"]).where(
        (F.col("skipped_rank") > F.col("highest")) & (F.col("skipped_rank") < F.col("landed"))
    )
    grouped = between.groupBy(*STREAM, "client", "ts", "landed_uid").agg(
        F.sort_array(F.collect_list(F.struct("skipped_rank", "skipped_uid"))).alias("skipped"),
        F.count("*").alias("n"),
    )
    detail = F.concat(
        F.lit("jumped to "),
        F.col("landed_uid"),
        F.lit(" over "),
        F.col("n").cast("string"),
        F.lit(" undelivered"),
    )
    return finding(
        grouped,
        NAME,
        uids=F.transform("skipped", lambda s: s["skipped_uid"]),
        messages=F.col("n"),
        ts=F.col("ts"),
        client=F.col("client"),
        scope=F.col("scope"),
        detail=detail,
    )
