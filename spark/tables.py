"""The post-mortem's tables on disk: each written once by Spark (one Parquet file), then read back.

Every query costs a Spark job or more, a fixed cost that dominates a small run. So the tables that
are small by nature (windows, gaps, latency, throughput: a row per window, per gap, per phase, per
topic-second) are read by the driver with pyarrow, in no job; the others (one row per duplicate,
loss, reorder or bad line: as many as the log has) are read back by Spark, and an empty one as an
empty relation, which Spark answers without a job. Either way the numbers come from the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession


def write(frame: DataFrame, path: Path) -> None:
    frame.coalesce(1).write.mode("overwrite").parquet(str(path))


def count(path: Path) -> int:
    """Rows in a written table, from its Parquet footers."""
    return sum(pq.read_metadata(part).num_rows for part in path.glob("part-*.parquet"))


def frame(spark: SparkSession, path: Path) -> DataFrame:
    """A written table for Spark queries; an empty one is a relation that needs no job."""
    table = spark.read.parquet(str(path))
    return table if count(path) else table.limit(0)


def rows(path: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """A small written table's rows, as dicts, in file order."""
    found: list[dict[str, Any]] = pq.read_table(path, columns=columns).to_pylist()
    return found
