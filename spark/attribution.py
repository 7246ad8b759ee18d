"""Which fault a window (or gap) belongs to: the fault whose activity overlaps it (the latest to
start, when several do), else the one that ended most recently before it; "none" before any fault."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from magnetar.spark.journal import Fault

NONE = "none"


def fault_of(start: Column, end: Column, faults: list[Fault]) -> Column:
    chosen: Column = F.lit(NONE)
    # built inside out, so the first matching branch is the preferred fault
    for fault in sorted(faults, key=lambda f: f.end_ns):
        chosen = F.when(start >= F.lit(fault.end_ns), F.lit(fault.name)).otherwise(chosen)
    for fault in sorted(faults, key=lambda f: f.start_ns):
        overlaps = (start <= F.lit(fault.end_ns)) & (end >= F.lit(fault.start_ns))
        chosen = F.when(overlaps, F.lit(fault.name)).otherwise(chosen)
    return chosen
