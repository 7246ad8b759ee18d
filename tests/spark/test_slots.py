"""A big log's disruption windows and gaps are found from time slots (see intervals), only the
stretches of slots without a success sorted, and only the rows in those stretches read again: the
same windows and gaps as sorting the whole log, which is how a small log is analysed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from magnetar.spark import postmortem
from magnetar.spark.intervals import covering
from magnetar.spark.location import Location
from tests.spark.conftest import Analysed


def rows(out: Location, name: str) -> list[str]:
    return sorted(map(repr, pq.read_table(out / f"{name}.parquet").to_pylist()))


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k not in ("generated_at", "run_dir", "input")}


def test_slotted_windows_and_gaps_are_the_sorted_ones(
    spark: SparkSession, golden: Analysed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the golden run (a small log, sorted whole) analysed again as a big log is
    monkeypatch.setattr(postmortem, "SORTED_WHOLE", 0)
    slotted = postmortem.run(golden.run_dir, spark, out=tmp_path / "slotted", html=False)
    sorted_whole = golden.result.out
    assert len(rows(sorted_whole, "windows")) == len(golden.expected.windows) > 0
    assert rows(slotted.out, "windows") == rows(sorted_whole, "windows")
    assert rows(sorted_whole, "gaps")
    assert rows(slotted.out, "gaps") == rows(sorted_whole, "gaps")
    assert comparable(slotted.summary) == comparable(golden.result.summary)


def test_covering_merges_then_closes_the_narrowest_gaps() -> None:
    # overlapping and adjacent ranges merge; apart ones stay apart while few enough
    assert covering([(10, 12), (1, 3), (4, 5), (11, 20)], 8) == [(1, 5), (10, 20)]
    # too many: the narrowest gaps are closed first (1 slot between 3 and 5, 2 between 5 and 8)
    assert covering([(1, 3), (5, 5), (8, 9), (30, 31)], 2) == [(1, 9), (30, 31)]
    assert covering([(1, 3), (5, 5), (8, 9), (30, 31)], 1) == [(1, 31)]
    assert covering([], 4) == []
