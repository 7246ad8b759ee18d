"""What every checker reports: one row per finding, in one shape, so the findings of all the
checkers make one table (``findings.parquet``) and one section of the report.

A finding names its checker, where it happened (topic, subscription, and the consumer and the
ordered stream when the checker looks at those), the messages involved (``uids``, at most
``UIDS`` of them, and ``messages``, how many there were), when it happened (``ts``), the fault
active then (``fault``, as the windows are attributed) and a line saying what was seen
(``detail``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from magnetar.spark.attribution import fault_of
from magnetar.spark.journal import Fault

#: the columns of a finding, in order (``fault`` is added when the findings are attributed)
COLUMNS = ("checker", "topic", "subscription", "client", "scope", "uids", "messages", "ts", "detail")
#: a finding lists at most this many message ids (a skip over a long stretch counts them all)
UIDS = 50


def finding(
    frame: DataFrame,
    checker: str,
    *,
    uids: Column,
    ts: Column,
    detail: Column,
    client: Column | None = None,
    scope: Column | None = None,
    messages: Column | None = None,
    subscription: Column | None = None,
) -> DataFrame:
    """``frame``'s rows as findings of ``checker``; what is not given is null (or, for
    ``messages``, the number of ``uids``)."""
    return frame.select(
        F.lit(checker).alias("checker"),
        F.col("topic").alias("topic"),
        (subscription if subscription is not None else F.col("subscription"))
        .cast("string")
        .alias("subscription"),
        (client if client is not None else F.lit(None)).cast("string").alias("client"),
        (scope if scope is not None else F.lit(None)).cast("string").alias("scope"),
        F.slice(uids, 1, UIDS).alias("uids"),
        (messages if messages is not None else F.size(uids)).cast("long").alias("messages"),
        ts.cast("long").alias("ts"),
        detail.cast("string").alias("detail"),
    )


def attributed(findings: DataFrame, faults: list[Fault]) -> DataFrame:
    """Each finding with the fault active at its time (see attribution)."""
    return findings.withColumn("fault", fault_of(F.col("ts"), faults))
