"""A small table of the driver's own rows (the phases' cuts, the subscriptions a run lists) as
literals in the plan.

``spark.createDataFrame`` of Python rows makes an RDD of pickled rows that only a Python worker
can read: each query over it forks Python workers and imports pyspark in them, a second or more of
a small post-mortem, paid again whenever the workers have idled out. Literals are evaluated in the
JVM like the rest of the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F


def literal_table(
    spark: SparkSession, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]
) -> DataFrame:
    """A DataFrame of ``rows`` with ``columns`` as (name, Spark SQL type) pairs, e.g.
    ``literal_table(spark, [("topic", "string"), ("since", "bigint")], [("t", 0)])``."""
    structs = [_struct(columns, row) for row in rows]
    if not structs:
        return spark.range(0).select(*[F.lit(None).cast(kind).alias(name) for name, kind in columns])
    return spark.range(1).select(F.inline(F.array(*structs)))


def _struct(columns: Sequence[tuple[str, str]], row: Sequence[Any]) -> Column:
    if len(row) != len(columns):
        raise ValueError(f"a row of {len(row)} values for {len(columns)} columns: {row!r}")
    return F.struct(
        *[F.lit(value).cast(kind).alias(name) for (name, kind), value in zip(columns, row, strict=True)]
    )
