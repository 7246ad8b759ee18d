"""The golden scenario, analysed once for the post-mortem tests (the session-wide ``spark``
fixture is in tests/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from magnetar.spark import postmortem, synthetic
from tests.spark.scenarios import GOLDEN


@dataclass(frozen=True)
class Analysed:
    run_dir: Path
    expected: synthetic.Expected
    result: postmortem.Result


@pytest.fixture(scope="session")
def golden(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Analysed:
    """The golden scenario, written and analysed once for all the tests that read its report."""
    run_dir = tmp_path_factory.mktemp("golden")
    expected = synthetic.write(GOLDEN, run_dir)
    return Analysed(run_dir, expected, postmortem.run(run_dir, spark))
