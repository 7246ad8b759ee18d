"""Which fault a window (or gap) belongs to: a cause precedes its effect, so the latest fault that
began at or before the window's start; "none" before any fault.

A fault that opens a condition (a freeze, a partition, a kill) thereby owns every window that
begins while it holds, until the fault that ends it (a thaw, a heal, a restart) begins — even a
window that outlasts the condition and so overlaps the recovery's activity. Windows that begin
after the recovery began are the recovery's (clients reconnecting, bundles taken again).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from magnetar.spark.journal import Fault

NONE = "none"
#: how long before a fault's recorded start a window it caused may seem to begin: a window opens
#: at the last success before the stall (up to one send interval earlier), and the journal's and
#: the clients' clocks are read by different processes
LEAD_NS = 100_000_000


def fault_of(start: Column, faults: list[Fault]) -> Column:
    chosen: Column = F.lit(NONE)
    # built inside out: the latest-starting fault is the outermost branch, so it is tried first
    for fault in sorted(faults, key=lambda f: f.start_ns):
        chosen = F.when(start >= F.lit(fault.start_ns - LEAD_NS), F.lit(fault.name)).otherwise(chosen)
    return chosen
