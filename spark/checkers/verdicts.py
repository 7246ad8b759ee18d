"""Every checker over one run: their findings in one table, each attributed to a fault."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from magnetar.spark.checkers import (
    duplicate,
    inconsistent_offsets,
    lost_write,
    nonmonotonic_poll,
    poll_skip,
    streams,
)
from magnetar.spark.checkers.finding import attributed
from magnetar.spark.journal import Fault

#: the checkers, in the order the report lists them
NAMES = (lost_write.NAME, duplicate.NAME, poll_skip.NAME, nonmonotonic_poll.NAME, inconsistent_offsets.NAME)


def findings(
    events: DataFrame, numbered: DataFrame, losses: DataFrame, duplicates: DataFrame, faults: list[Fault]
) -> DataFrame:
    """checker, topic, subscription, client, scope, uids, messages, ts, detail, fault.

    ``numbered``: every receipt, numbered (see receipts); ``losses`` and ``duplicates``: the
    tables of those names, whose rows are the lost-write and duplicate findings."""
    types = streams.subscription_types(events)
    ranks = streams.ranked(events, types)
    ordered = streams.ordered_receipts(numbered, types, ranks)
    found = (
        lost_write.find(losses)
        .unionByName(duplicate.find(duplicates))
        .unionByName(poll_skip.find(ordered, ranks, events))
        .unionByName(nonmonotonic_poll.find(ordered, events))
        .unionByName(inconsistent_offsets.find(numbered, events))
    )
    return attributed(found, faults).orderBy("ts", "checker", F.col("uids")[0])
