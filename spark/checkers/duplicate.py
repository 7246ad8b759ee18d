"""duplicate: a message received more than once by one subscription (over all its consumers and
regions). The duplicates table (see duplicates) has one row per extra receipt; each is a finding,
by the consumer that received it again, dated by that receipt."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from magnetar.spark.checkers.finding import finding

NAME = "duplicate"


def find(duplicates: DataFrame) -> DataFrame:
    detail = F.concat(
        F.lit("receipt "),
        (F.col("repeat") + 1).cast("string"),
        F.lit(", "),
        F.regexp_replace("kind", "_", "-"),
        F.lit(" (first from "),
        F.col("first_cluster"),
        F.lit(", again from "),
        F.col("cluster"),
        F.lit(")"),
    )
    return finding(
        duplicates, NAME, uids=F.array("uid"), ts=F.col("ts"), client=F.col("client"), detail=detail
    )
