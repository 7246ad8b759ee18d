"""The post-mortem's tables on disk: each written once by Spark (a Parquet directory), then read back.

A table is written as its plan's last stage leaves it, one file per task, not coalesced into one
file: coalescing without a shuffle runs that whole stage (a window over every receipt, say) in a
single task, on one core. The files' names keep the partitions' order, so a table read back in
file order (see rows) is in the order its plan gave it.

Every query costs a Spark job or more, a fixed cost that dominates a small run. So the tables that
are small by nature (windows, gaps, latency, throughput: a row per window, per gap, per phase, per
topic-second) are read by the driver with pyarrow, in no job; the others (one row per duplicate,
loss, reorder or bad line: as many as the log has) are read back by Spark, and an empty one as an
empty relation, which Spark answers without a job. Either way the numbers come from the files.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from magnetar.spark.location import Location, Where


def write(frame: DataFrame, path: Location) -> None:
    frame.write.mode("overwrite").parquet(path.spark)


def count(path: Where) -> int:
    """Rows in a written table, from its Parquet footers."""
    parts = Location.of(path).files(prefix="part-", suffix=".parquet")
    return sum(part.parquet_rows() for part in parts)


def frame(spark: SparkSession, path: Location, schema: StructType) -> DataFrame:
    """A written table for Spark queries (``schema``: the frame's that wrote it); an empty one is a
    relation that needs no job. Given its schema, the read needs none either: without it Spark
    runs a job to read the files' footers for one."""
    table = spark.read.schema(schema).parquet(path.spark)
    return table if count(path) else table.limit(0)


def rows(path: Where, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """A small written table's rows, as dicts, in file order."""
    found: list[dict[str, Any]] = Location.of(path).read_parquet(columns).to_pylist()
    return found
