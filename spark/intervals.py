"""Maximal intervals in which work is pending and nothing succeeds: the shape of every disruption
window (architecture §6), whatever "pending" and "success" mean for producers, consumers or topics.

Input: per key, ``steps`` (``ts``, ``delta`` to the pending count, ``success``) and each key's
lifetime (``begin``, ``end``). The pending count is the running sum of deltas. An interval starts
when the count is positive after a step that reset it (a success, or a fall to zero) and ends at
the next reset; an interval still pending when the key's life ends is ``open`` and ends there.
At equal times, decrements come before increments, so a success and a new send in the same
nanosecond do not count as a window.

Doing that with a running sum over every step sorts the whole log, three times. Instead, time is
cut into slots of half the threshold. A window contains no success and is longer than the
threshold, so it lies in a run of slots without a success, between two slots with one: only
those stretches (few) are sorted, starting from the pending count at their first slot, which
comes from per-slot sums (a hash aggregation, no sort), and only the steps whose time falls in
them are made again for that (see spans). The answer is the same.

A small log is sorted whole all the same (``slotted=False``): sorting it costs nothing, while the
slots cost several more Spark jobs (two checkpoints per kind, a broadcast), each a fixed cost.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

#: below this threshold slots would be too many; every step is then sorted
FINEST_SLOT_NS = 1_000_000
BEGIN, REAL_END, STRETCH_END = -1, 1, 2


def pending_intervals(
    steps: DataFrame, lifetimes: DataFrame, keys: list[str], threshold_ns: int, *, slotted: bool = True
) -> DataFrame:
    """keys..., start, end, open: intervals longer than ``threshold_ns`` within each key's lifetime."""
    rows = _rows(steps, lifetimes, keys)
    slot_ns = threshold_ns // 2
    if not slotted or slot_ns < FINEST_SLOT_NS:
        return _intervals(rows, lifetimes, keys, [], threshold_ns)
    rows = rows.withColumn("slot", F.floor(F.col("ts") / slot_ns).cast("long"))
    # one aggregation gives each slot's sum and whether it holds a boundary; it is small (slots of
    # a key's life), computed at once, and both uses below read it instead of the log
    per_slot = (
        rows.groupBy(*keys, "slot")
        .agg(
            F.sum("delta").alias("sum"),
            F.max((F.col("success") | (F.col("terminal") != 0)).cast("int")).alias("busy"),
        )
        .localCheckpoint()
    )
    stretches = quiet_stretches(per_slot.where(F.col("busy") == 1), keys, slot_ns).localCheckpoint()
    # only the rows in some key's quiet stretch are wanted below: a test of their time against a
    # few ranges (pushed down to the log's scan) drops the others before every step is made and
    # probed against the stretches
    rows = rows.where(in_spans(F.col("ts"), spans(stretches), slot_ns))
    earlier = Window.partitionBy(*keys).orderBy("slot").rowsBetween(Window.unboundedPreceding, -1)
    before = per_slot.withColumn("before", F.coalesce(F.sum("sum").over(earlier), F.lit(0))).select(
        *keys, F.col("slot").alias("first"), "before"
    )
    inside = rows.join(
        F.broadcast(stretches.select(*keys, "first", F.explode(F.sequence("first", "last")).alias("slot"))),
        [*keys, "slot"],
    ).drop("slot")
    heads = stretches.join(before, [*keys, "first"], "left").select(
        *keys,
        "first",
        (F.col("first") * slot_ns - 1).alias("ts"),
        F.coalesce("before", F.lit(0)).alias("delta"),
        F.lit(True).alias("success"),
        F.lit(0).alias("terminal"),
    )
    tails = stretches.select(
        *keys,
        "first",
        ((F.col("last") + 1) * slot_ns).alias("ts"),
        F.lit(0).alias("delta"),
        F.lit(True).alias("success"),
        F.lit(STRETCH_END).alias("terminal"),
    )
    return _intervals(inside.unionByName(heads).unionByName(tails), lifetimes, keys, ["first"], threshold_ns)


#: the most ranges the quiet stretches' slots are covered by (see covering); more stretches than
#: SPANS_READ are not read by the driver, and nothing is dropped before the stretches' join
MOST_SPANS, SPANS_READ = 32, 10_000


def spans(stretches: DataFrame) -> list[tuple[int, int]] | None:
    """The slots of every key's quiet stretches (first, last), as at most MOST_SPANS ranges of
    slots; None when there are more than SPANS_READ stretches."""
    found = stretches.select("first", "last").limit(SPANS_READ + 1).collect()
    if len(found) > SPANS_READ:
        return None
    return covering([(row["first"], row["last"]) for row in found], MOST_SPANS)


def covering(ranges: list[tuple[int, int]], most: int) -> list[tuple[int, int]]:
    """At most ``most`` disjoint ranges (first, last: inclusive) that cover every one of
    ``ranges``, and as little else as they can: overlapping and adjacent ranges are merged, then
    the narrowest gaps between them are closed until few enough are left."""
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    if len(merged) <= most:
        return merged
    gaps = sorted(range(1, len(merged)), key=lambda i: merged[i][0] - merged[i - 1][1])
    closed = set(gaps[: len(merged) - most])
    covered: list[tuple[int, int]] = []
    for index, (first, last) in enumerate(merged):
        if index in closed:
            covered[-1] = (covered[-1][0], last)
        else:
            covered.append((first, last))
    return covered


def in_spans(ts: Column, slots: list[tuple[int, int]] | None, slot_ns: int) -> Column:
    """Whether ``ts`` falls in one of the ranges of slots ``slots`` (every time, for None)."""
    if slots is None:
        return F.lit(True)
    found = F.lit(False)
    for first, last in slots:
        found = found | ((ts >= F.lit(first * slot_ns)) & (ts < F.lit((last + 1) * slot_ns)))
    return found


def quiet_stretches(boundaries: DataFrame, keys: list[str], slot_ns: int) -> DataFrame:
    """keys..., first, last: runs of slots with no boundary, with the boundary slot on each side."""
    busy = boundaries.select(*keys, "slot").distinct()
    following = Window.partitionBy(*keys).orderBy("slot")
    return (
        busy.withColumn("last", F.lead("slot").over(following))
        .where(F.col("last") - F.col("slot") > 1)
        .select(*keys, F.col("slot").alias("first"), "last")
    )


def _rows(steps: DataFrame, lifetimes: DataFrame, keys: list[str]) -> DataFrame:
    """The steps, with each key's begin (a no-op, but a boundary) and end (a success ending its life)."""
    marks = [
        lifetimes.select(
            *keys, F.col(when).alias("ts"), F.lit(0).alias("delta"), F.lit(success).alias("success"),
            F.lit(terminal).alias("terminal"),
        )
        for when, success, terminal in (("begin", False, BEGIN), ("end", True, REAL_END))
    ]  # fmt: skip
    rows = steps.select(*keys, "ts", "delta", "success", F.lit(0).alias("terminal"))
    return rows.unionByName(marks[0]).unionByName(marks[1])


def _intervals(
    rows: DataFrame, lifetimes: DataFrame, keys: list[str], part: list[str], threshold_ns: int
) -> DataFrame:
    """The running-sum definition, over ``rows`` partitioned by keys (and stretch)."""
    by = [*keys, *part]
    order = Window.partitionBy(*by).orderBy("ts", "delta", "terminal")
    so_far = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    rows = rows.withColumn("pending", F.sum("delta").over(so_far))
    rows = rows.withColumn("reset", (F.col("success") | (F.col("pending") <= 0)).cast("int"))
    rows = rows.withColumn("group", F.sum("reset").over(so_far))
    groups = rows.groupBy(*by, "group").agg(
        F.min(F.when(F.col("pending") > 0, F.col("ts"))).alias("start"),
        F.min("ts").alias("first_ts"),
        F.max(F.when(F.col("reset") == 1, F.col("terminal"))).alias("closed_by"),
    )
    following = Window.partitionBy(*by).orderBy("group")
    groups = groups.withColumn("end", F.lead("first_ts").over(following)).withColumn(
        "ended_by", F.lead("closed_by").over(following)
    )
    bounded = groups.join(lifetimes.select(*keys, "begin"), keys).withColumn(
        "start", F.when(F.col("start").isNotNull(), F.greatest("start", "begin"))
    )
    return bounded.where(
        F.col("start").isNotNull()
        & F.col("end").isNotNull()
        & (F.col("ended_by") != STRETCH_END)
        & (F.col("end") - F.col("start") > threshold_ns)
    ).select(*keys, "start", "end", (F.col("ended_by") == REAL_END).alias("open"))
