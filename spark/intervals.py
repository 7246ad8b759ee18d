"""Maximal intervals in which work is pending and nothing succeeds: the shape of every disruption
window (DESIGN §6), whatever "pending" and "success" mean for producers, consumers or topics.

Input: per key, ``steps`` (``ts``, ``delta`` to the pending count, ``success``) and each key's
lifetime (``begin``, ``end``). The pending count is the running sum of deltas. An interval starts
when the count is positive after a step that reset it (a success, or a fall to zero) and ends at
the next reset; an interval still pending when the key's life ends is ``open`` and ends there.
At equal times, decrements come before increments, so a success and a new send in the same
nanosecond do not count as a window.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F


def pending_intervals(
    steps: DataFrame, lifetimes: DataFrame, keys: list[str], threshold_ns: int
) -> DataFrame:
    """keys..., start, end, open: intervals longer than ``threshold_ns`` within each key's lifetime."""
    ends = lifetimes.select(
        *keys,
        F.col("end").alias("ts"),
        F.lit(0).alias("delta"),
        F.lit(True).alias("success"),
        F.lit(1).alias("terminal"),
    )
    rows = steps.select(*keys, "ts", "delta", "success", F.lit(0).alias("terminal")).unionByName(ends)
    order = Window.partitionBy(*keys).orderBy("ts", "delta", "terminal")
    so_far = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    rows = rows.withColumn("pending", F.sum("delta").over(so_far))
    rows = rows.withColumn("reset", (F.col("success") | (F.col("pending") <= 0)).cast("int"))
    rows = rows.withColumn("group", F.sum("reset").over(so_far))
    groups = rows.groupBy(*keys, "group").agg(
        F.min(F.when(F.col("pending") > 0, F.col("ts"))).alias("start"),
        F.min("ts").alias("first"),
        F.max(F.when(F.col("reset") == 1, F.col("terminal"))).alias("closed_by_end"),
    )
    following = Window.partitionBy(*keys).orderBy("group")
    groups = groups.withColumn("end", F.lead("first").over(following)).withColumn(
        "open", F.lead("closed_by_end").over(following) == 1
    )
    bounded = groups.join(lifetimes.select(*keys, F.col("begin")), keys).withColumn(
        "start", F.when(F.col("start").isNotNull(), F.greatest("start", "begin"))
    )
    return bounded.where(
        F.col("start").isNotNull() & F.col("end").isNotNull() & (F.col("end") - F.col("start") > threshold_ns)
    ).select(*keys, "start", "end", F.coalesce("open", F.lit(False)).alias("open"))
