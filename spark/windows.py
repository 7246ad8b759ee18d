"""Disruption windows (architecture §6), per producer, per consumer and per topic, each attributed to a fault.

- producer (key: client, topic): at least one send outstanding (sent, neither ``send_ok`` nor
  ``send_err`` yet) and no ``send_ok``;
- consumer (key: client, topic, subscription): messages available to its subscription
  (acknowledged to the producer, later received by the subscription, not yet received) and none
  received by this consumer; a message never received is a loss, reported as such, not a window
  that lasts to the end of the run;
- topic: work pending on the topic (a send outstanding or a message available to any of its
  subscriptions) and no operation on it succeeding (no ``send_ok``, no receive).

Each is bounded by its key's life in the log (first to last event); a window still pending when
that life ends is reported as ``open``. Windows last longer than the threshold (default 50 ms).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from magnetar.spark.attribution import fault_of
from magnetar.spark.intervals import pending_intervals
from magnetar.spark.journal import Fault
from magnetar.spark.receipts import SUBSCRIPTION

COLUMNS = ["kind", "topic", "client", "subscription", "start", "end", "open", "duration_ms", "fault"]


def _send_steps(events: DataFrame) -> DataFrame:
    sends = events.where(F.col("event").isin("send", "send_ok", "send_err"))
    return sends.select(
        "client",
        "topic",
        "ts",
        F.when(F.col("event") == "send", 1).otherwise(-1).alias("delta"),
        (F.col("event") == "send_ok").alias("success"),
    )


def lifetimes(events: DataFrame) -> DataFrame:
    """First and last event of every role, client, topic and subscription: a small table that
    every kind's lifetimes are cut from, so the log is scanned for them once."""
    return events.groupBy("role", "client", "topic", "subscription").agg(
        F.min("ts").alias("begin"), F.max("ts").alias("end")
    )


def _lifetimes(lives: DataFrame, keys: list[str]) -> DataFrame:
    return lives.groupBy(*keys).agg(F.min("begin").alias("begin"), F.max("end").alias("end"))


def availability_steps(acked: DataFrame, firsts: DataFrame) -> DataFrame:
    """topic, subscription, ts, delta: +1 when a message is acknowledged to its producer, -1 when
    the subscription first receives it (nothing when it arrived before the acknowledgement did)."""
    paired = acked.select("topic", "uid", F.col("ts").alias("acked")).join(
        firsts.select(*SUBSCRIPTION, "uid", F.col("ts").alias("received")), ["topic", "uid"]
    )
    waited = paired.where(F.col("received") > F.col("acked"))
    return waited.select(*SUBSCRIPTION, F.col("acked").alias("ts"), F.lit(1).alias("delta")).unionByName(
        waited.select(*SUBSCRIPTION, F.col("received").alias("ts"), F.lit(-1).alias("delta"))
    )


def producer_windows(events: DataFrame, lives: DataFrame, threshold_ns: int, slotted: bool) -> DataFrame:
    keys = ["client", "topic"]
    producers = events.where(F.col("role") == "producer")
    mine = _lifetimes(lives.where(F.col("role") == "producer"), keys)
    found = pending_intervals(_send_steps(producers), mine, keys, threshold_ns, slotted=slotted)
    return found.select(
        F.lit("producer").alias("kind"),
        "topic",
        "client",
        F.lit(None).cast("string").alias("subscription"),
        "start",
        "end",
        "open",
    )


def consumer_windows(
    events: DataFrame, lives: DataFrame, available: DataFrame, threshold_ns: int, slotted: bool
) -> DataFrame:
    keys = ["client", "topic", "subscription"]
    consumers = events.where((F.col("role") == "consumer") & F.col("subscription").isNotNull())
    mine = _lifetimes(lives.where((F.col("role") == "consumer") & F.col("subscription").isNotNull()), keys)
    members = mine.select(*keys)
    steps = available.join(members, SUBSCRIPTION).select(*keys, "ts", "delta", F.lit(False).alias("success"))
    received = consumers.where(F.col("event") == "receive").select(
        *keys, "ts", F.lit(0).alias("delta"), F.lit(True).alias("success")
    )
    found = pending_intervals(steps.unionByName(received), mine, keys, threshold_ns, slotted=slotted)
    return found.select(
        F.lit("consumer").alias("kind"), "topic", "client", "subscription", "start", "end", "open"
    )


def topic_windows(
    events: DataFrame, lives: DataFrame, available: DataFrame, threshold_ns: int, slotted: bool
) -> DataFrame:
    keys = ["topic"]
    sends = _send_steps(events.where(F.col("role") == "producer")).drop("client")
    waiting = available.select("topic", "ts", "delta", F.lit(False).alias("success"))
    received = events.where(F.col("event") == "receive").select(
        "topic", "ts", F.lit(0).alias("delta"), F.lit(True).alias("success")
    )
    steps = sends.unionByName(waiting).unionByName(received)
    mine = _lifetimes(lives.where(F.col("topic").isNotNull()), keys)
    found = pending_intervals(steps, mine, keys, threshold_ns, slotted=slotted)
    return found.select(
        F.lit("topic").alias("kind"),
        "topic",
        F.lit(None).cast("string").alias("client"),
        F.lit(None).cast("string").alias("subscription"),
        "start",
        "end",
        "open",
    )


def disruption_windows(
    events: DataFrame,
    lives: DataFrame,
    available: DataFrame,
    faults: list[Fault],
    threshold_ms: float,
    *,
    slotted: bool = True,
) -> DataFrame:
    """Every kind's windows; ``slotted`` as in intervals (False for a small log)."""
    threshold_ns = int(threshold_ms * 1_000_000)
    found = (
        producer_windows(events, lives, threshold_ns, slotted)
        .unionByName(consumer_windows(events, lives, available, threshold_ns, slotted))
        .unionByName(topic_windows(events, lives, available, threshold_ns, slotted))
    )
    return (
        found.withColumn("duration_ms", (F.col("end") - F.col("start")) / 1e6)
        .withColumn("fault", fault_of(F.col("start"), faults))
        .select(*COLUMNS)
    )
