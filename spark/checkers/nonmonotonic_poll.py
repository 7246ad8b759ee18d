"""nonmonotonic-poll: a consumer of a subscription that promises order (see streams) received a
message of a stream ranked below the one it received just before in that stream, and nothing
explains the step back:

- a seek on the subscription since that previous receipt;
- the consumer's own negative acknowledgement, connect, disconnect or region switch since then
  (Pulsar redelivers what is unacknowledged from the subscription's position);
- a redelivery count above zero on the receipt (the broker says it is a redelivery).

The finding is the message received out of turn, dated by its receipt. A step back to a message
received before is also a duplicate; to one that was skipped, the skip is also a poll-skip.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from magnetar.spark.checkers.finding import finding
from magnetar.spark.checkers.streams import STREAM

NAME = "nonmonotonic-poll"
#: a consumer's own events after which the broker may start again from the subscription's position
RESTARTS = ("nack", "connect", "disconnect", "switch_cluster")


def find(ordered: DataFrame, events: DataFrame) -> DataFrame:
    mine = Window.partitionBy("client", *STREAM).orderBy("ts", "rank")
    marked = (
        ordered.withColumn("previous_rank", F.lag("rank").over(mine))
        .withColumn("previous_uid", F.lag("uid").over(mine))
        .withColumn("previous_ts", F.lag("ts").over(mine))
    )
    back = marked.where(
        (F.col("rank") < F.col("previous_rank")) & (F.coalesce(F.col("redelivery"), F.lit(0)) == 0)
    )
    restarts = events.where(F.col("event").isin(*RESTARTS)).select(
        F.col("client").alias("restart_client"), F.col("ts").alias("restart_ts")
    )
    by_client = (
        (back["client"] == restarts["restart_client"])
        & (restarts["restart_ts"] >= back["previous_ts"])
        & (restarts["restart_ts"] <= back["ts"])
    )
    seeks = events.where(F.col("event") == "seek").select(
        F.col("topic").alias("seek_topic"),
        F.col("subscription").alias("seek_subscription"),
        F.col("ts").alias("seek_ts"),
    )
    unexplained = back.join(restarts, by_client, "left_anti")
    by_subscription = (
        (unexplained["topic"] == seeks["seek_topic"])
        & (unexplained["subscription"] == seeks["seek_subscription"])
        & (seeks["seek_ts"] >= unexplained["previous_ts"])
        & (seeks["seek_ts"] <= unexplained["ts"])
    )
    unexplained = unexplained.join(seeks, by_subscription, "left_anti")
    detail = F.concat(F.lit("received after "), F.col("previous_uid"), F.lit(", with no seek or redelivery"))
    return finding(
        unexplained,
        NAME,
        uids=F.array("uid"),
        ts=F.col("ts"),
        client=F.col("client"),
        scope=F.col("scope"),
        detail=detail,
    )
