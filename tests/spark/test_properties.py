"""How the log is laid out on disk changes nothing: line order, and how events are split over files."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from magnetar.spark import postmortem, synthetic
from tests.spark.scenarios import SMALL

#: what must not depend on the layout (the run directory and the clock of course do)
VOLATILE = ("generated_at", "run_dir", "input")


def comparable(result: postmortem.Result) -> dict[str, Any]:
    summary = {k: v for k, v in result.summary.items() if k not in VOLATILE}
    tables = {
        name: sorted(map(repr, pq.read_table(result.out / f"{name}.parquet").to_pylist()))
        for name in ("windows", "duplicates", "losses", "reorders", "throughput", "gaps")
    }
    return {"summary": summary, "tables": tables}


@pytest.fixture(scope="module")
def baseline(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run_dir = tmp_path_factory.mktemp("small") / "small"
    synthetic.write(SMALL, run_dir)
    found = comparable(postmortem.run(run_dir, spark, html=False))
    # the scenario is not vacuous: each table has something to get wrong
    head = found["summary"]["headline"]
    assert (head["windows"], head["losses"], head["duplicates_same_region"], head["reorders_producer"]) == (
        2,
        1,
        1,
        1,
    )
    return found


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), files=st.integers(1, 7), shuffle=st.booleans())
def test_shuffling_lines_or_splitting_files_changes_nothing(
    spark: SparkSession,
    baseline: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    files: int,
    shuffle: bool,
) -> None:
    run_dir = tmp_path_factory.mktemp("layout") / "small"
    synthetic.write(SMALL, run_dir, files=files, shuffle=seed if shuffle else None)
    assert len(list((run_dir / "events").glob("*.jsonl"))) == files
    assert comparable(postmortem.run(run_dir, spark, html=False)) == baseline
