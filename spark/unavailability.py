"""Maximum unavailability per fault: the longest gap between consecutive successful operations
(``send_ok`` or receive, by any client) on one topic, among the gaps attributed to the fault
(overlapping it, or following it before the next fault; see attribution).

Only gaps longer than the window threshold are kept, so only the stretches of time slots without
a success are sorted (see intervals), not the whole log; a small log is sorted whole
(``slotted=False``), which is cheaper there."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from magnetar.spark.attribution import fault_of
from magnetar.spark.intervals import FINEST_SLOT_NS, in_spans, quiet_stretches, spans
from magnetar.spark.journal import Fault


def gaps(events: DataFrame, faults: list[Fault], shortest_ns: int, *, slotted: bool = True) -> DataFrame:
    """fault, topic, start, end, gap_ms: gaps longer than ``shortest_ns`` (shorter ones never win)."""
    ok = events.where(F.col("event").isin("send_ok", "receive") & F.col("topic").isNotNull()).select(
        "topic", "ts"
    )
    slot_ns = shortest_ns // 2
    if not slotted or slot_ns < FINEST_SLOT_NS:
        following_all = Window.partitionBy("topic").orderBy("ts")
        spaced_all = ok.withColumn("start", F.lag("ts").over(following_all)).where(
            F.col("start").isNotNull() & (F.col("ts") - F.col("start") > shortest_ns)
        )
        return _attributed(spaced_all, faults)
    ok = ok.withColumn("slot", F.floor(F.col("ts") / slot_ns).cast("long"))
    stretches = quiet_stretches(ok, ["topic"], slot_ns).localCheckpoint()
    # only the successes in some topic's quiet stretch are wanted: a test of their time against a
    # few ranges drops the others before they are probed against the stretches (see intervals)
    inside = ok.where(in_spans(F.col("ts"), spans(stretches), slot_ns)).join(
        F.broadcast(stretches.select("topic", "first", F.explode(F.sequence("first", "last")).alias("slot"))),
        ["topic", "slot"],
    )
    following = Window.partitionBy("topic", "first").orderBy("ts")
    spaced = inside.withColumn("start", F.lag("ts").over(following)).where(
        F.col("start").isNotNull() & (F.col("ts") - F.col("start") > shortest_ns)
    )
    return _attributed(spaced, faults)


def _attributed(spaced: DataFrame, faults: list[Fault]) -> DataFrame:
    return spaced.select(
        fault_of(F.col("start"), faults).alias("fault"),
        "topic",
        "start",
        F.col("ts").alias("end"),
        ((F.col("ts") - F.col("start")) / 1e6).alias("gap_ms"),
    )
