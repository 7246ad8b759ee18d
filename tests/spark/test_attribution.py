"""A window belongs to the fault that caused it, the latest to begin before it: in
``make demo``'s region-outage run the 12 s windows that began 4 ms after the freeze went to the
restore, which began 12 s later, and the outage showed 0 windows."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from magnetar.spark import postmortem, synthetic
from tests.spark.scenarios import OUTAGE, REGION_OUTAGE, RESTORE


def test_a_window_outlasting_a_freeze_is_the_freezes_not_the_restores(
    spark: SparkSession, tmp_path: Path
) -> None:
    expected = synthetic.write(REGION_OUTAGE, tmp_path)
    result = postmortem.run(tmp_path, spark, html=False)
    found = sorted(
        (w["kind"], w["client"], w["start"], w["end"], w["fault"])
        for w in pq.read_table(result.out / "windows.parquet").to_pylist()
        if not w["open"]
    )
    assert found == sorted((w.kind, w.client, w.start, w.end, w.fault) for w in expected.windows)
    by_fault = {f["name"]: f for f in result.summary["faults"]}
    assert by_fault[OUTAGE]["windows_by_kind"]["producer"] == 1
    assert by_fault[RESTORE]["windows_by_kind"]["consumer"] == 1
    assert by_fault[OUTAGE]["max_unavailability_ms"] > 1000  # the 1.2 s gap is the outage's
