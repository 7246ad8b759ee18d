"""Duplicates: a uid received more than once by one logical subscription (over all regions).

Every receipt after the first is one duplicate: a same-region redelivery when it came from the
region of the first receipt (a reconnect, a redelivery after a missing ack), a cross-region
failover duplicate when it came from another region (the subscription moved before its
replicated position caught up)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

SAME_REGION, CROSS_REGION = "same_region", "cross_region"


def duplicates(numbered: DataFrame) -> DataFrame:
    repeats = numbered.where(F.col("n") > 1)
    return repeats.select(
        "topic",
        "subscription",
        "uid",
        "client",
        "cluster",
        "first_cluster",
        "ts",
        (F.col("n") - 1).alias("repeat"),
        F.when(F.col("cluster") == F.col("first_cluster"), SAME_REGION).otherwise(CROSS_REGION).alias("kind"),
    )
