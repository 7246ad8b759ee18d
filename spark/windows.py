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

from pyspark.sql import Column, DataFrame
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


def availability_steps(deliveries: DataFrame) -> DataFrame:
    """topic, subscription, ts, delta: +1 when a message is acknowledged to its producer, -1 when
    the subscription first receives it (nothing when it arrived before the acknowledgement did);
    ``deliveries``: see receipts."""
    waited = deliveries.where(F.col("received") > F.col("ts")).select(
        *SUBSCRIPTION, F.col("ts").alias("acked"), "received"
    )
    # both steps of a message from one pass over the join (a union of two selects of it would
    # plan the join twice)
    steps = F.array(
        F.struct(F.col("acked").alias("ts"), F.lit(1).alias("delta")),
        F.struct(F.col("received").alias("ts"), F.lit(-1).alias("delta")),
    )
    return waited.select(*SUBSCRIPTION, F.explode(steps).alias("step")).select(
        *SUBSCRIPTION, "step.ts", "step.delta"
    )


#: every kind's windows are found in one plan, keyed by kind and all of these; a key a kind does
#: not have (a producer's subscription, a topic's client and subscription) is NOT_A_KEY there
KEYS = ["kind", "topic", "client", "subscription"]
NOT_A_KEY = ""


def _fanned(frame: DataFrame, kinds: dict[str, tuple[list[str], Column]], *columns: str) -> DataFrame:
    """``frame``'s rows once for each of ``kinds`` (kind: its keys, and which rows are its) that
    they belong to, keyed by KEYS. A row with a null key never made a window (its key matches no
    lifetime), so it is left out of that kind here.

    A plain select of ``frame`` for each kind, the selects unioned: ``frame`` (a scan of the staged
    log's few columns, or a small table) is read once a kind, which costs far less than one read
    whose rows are each copied into an array of kinds and exploded (twice the CPU a row)."""
    fanned = [
        frame.where(F.coalesce(mine & ~_any_null(keys), F.lit(False))).select(
            F.lit(kind).alias("kind"),
            *[(F.col(k).cast("string") if k in keys else F.lit(NOT_A_KEY)).alias(k) for k in KEYS[1:]],
            *columns,
        )
        for kind, (keys, mine) in kinds.items()
    ]
    return _union(fanned)


def _any_null(keys: list[str]) -> Column:
    found = F.col(keys[0]).isNull()
    for key in keys[1:]:
        found = found | F.col(key).isNull()
    return found


def _kinds(events: DataFrame, lives: DataFrame, available: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Every kind's steps and lifetimes, keyed by KEYS; the log's sends and receipts are read once
    for each kind they make steps of (see _fanned)."""
    producer, consumer, topic = ["client", "topic"], ["client", "topic", "subscription"], ["topic"]
    is_consumer = (F.col("role") == "consumer") & F.col("subscription").isNotNull()
    everyone = F.lit(True)
    step = ("ts", "delta", "success")
    sends = _send_steps(events.where(F.col("role") == "producer"))
    send_steps = _fanned(sends, {"producer": (producer, everyone), "topic": (topic, everyone)}, *step)
    receipts = events.where(F.col("event") == "receive").select(
        "role", *consumer, "ts", F.lit(0).alias("delta"), F.lit(True).alias("success")
    )
    receipt_steps = _fanned(
        receipts, {"consumer": (consumer, is_consumer), "topic": (topic, everyone)}, *step
    )
    # a subscription's waiting messages count for each of its consumers, and for its topic
    members = _lifetimes(lives.where(is_consumer), consumer).select(*consumer)
    waiting = available.select(*SUBSCRIPTION, "ts", "delta", F.lit(False).alias("success"))
    waiting_steps = _fanned(waiting.join(members, SUBSCRIPTION), {"consumer": (consumer, everyone)}, *step)
    topic_waiting_steps = _fanned(waiting, {"topic": (topic, everyone)}, *step)
    steps = _union([send_steps, receipt_steps, waiting_steps, topic_waiting_steps])
    kinds = {
        "producer": (producer, F.col("role") == "producer"),
        "consumer": (consumer, is_consumer),
        "topic": (topic, everyone),
    }
    return steps, _lifetimes(_fanned(lives, kinds, "begin", "end"), KEYS)


def _union(frames: list[DataFrame]) -> DataFrame:
    found = frames[0]
    for frame in frames[1:]:
        found = found.unionByName(frame)
    return found


def disruption_windows(
    events: DataFrame,
    lives: DataFrame,
    available: DataFrame,
    faults: list[Fault],
    threshold_ms: float,
    *,
    slotted: bool = True,
) -> DataFrame:
    """Every kind's windows; ``slotted`` as in intervals (False for a small log).

    The three kinds are one set of keyed intervals, found in one plan: the slots' aggregations and
    the sorts are done once for all of them, not once a kind (each pass a fixed cost in jobs)."""
    threshold_ns = int(threshold_ms * 1_000_000)
    steps, lifetimes = _kinds(events, lives, available)
    found = pending_intervals(steps, lifetimes, KEYS, threshold_ns, slotted=slotted)
    return (
        found.select(
            "kind",
            "topic",
            F.when(F.col("kind") != "topic", F.col("client")).alias("client"),
            F.when(F.col("kind") == "consumer", F.col("subscription")).alias("subscription"),
            "start",
            "end",
            "open",
        )
        .withColumn("duration_ms", (F.col("end") - F.col("start")) / 1e6)
        .withColumn("fault", fault_of(F.col("start"), faults))
        .select(*COLUMNS)
    )
