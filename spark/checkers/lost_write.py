"""lost-write: a message acknowledged to its producer (``send_ok``) that a subscription which ran
to the end never received. The losses table (see losses) already is exactly that, per
subscription; as findings, each is dated by its acknowledgement (the fault active when the
producer was told it was safe)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from magnetar.spark.checkers.finding import finding

NAME = "lost-write"


def find(losses: DataFrame) -> DataFrame:
    return finding(
        losses,
        NAME,
        uids=F.array("uid"),
        ts=F.col("acked_ts"),
        detail=F.lit("acknowledged to its producer, never received"),
    )
