"""The post-mortem on a Spark cluster, not only local mode: a real standalone master
and worker started from the installed pyspark (``spark-class …Master`` / ``…Worker`` on
loopback, see magnetar.spark.standalone), ``magnetar postmortem --master spark://…`` run against
them as a user would, and the same summary as local mode gives for the same run, named by path or
by ``file://`` URI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from magnetar.spark.cli import EXIT_LOSS
from magnetar.spark.standalone import Standalone, spark_env, standalone
from tests.spark.conftest import Analysed

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """A Spark standalone master with one worker (2 cores, 2 GB), for this module's tests."""
    with standalone(tmp_path_factory.mktemp("standalone")) as cluster:
        yield cluster


@pytest.mark.parametrize("named_by", ["path", "uri"])
def test_the_post_mortem_on_a_standalone_cluster_matches_local_mode(
    golden: Analysed, standalone_master: Standalone, tmp_path: Path, named_by: str
) -> None:
    out = tmp_path / "report"
    run, report = (golden.run_dir.as_uri(), out.as_uri()) if named_by == "uri" else (golden.run_dir, out)
    launched = standalone_master.executors_launched()
    command = [sys.executable, "-m", "magnetar", "postmortem", str(run), "--master", standalone_master.url]
    finished = subprocess.run(
        [*command, "--out", str(report)], capture_output=True, text=True, timeout=600, env=spark_env()
    )
    # the golden run has two losses: the post-mortem reports them and says so in its exit status
    assert finished.returncode == EXIT_LOSS, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert standalone_master.executors_launched() > launched, "the cluster's worker ran the job"
    on_cluster = json.loads((out / "summary.json").read_text())
    assert on_cluster["run_dir"] == str(run)
    local = golden.result.summary
    for key in ("headline", "faults", "windows", "duplicates", "losses", "reorders", "bad_lines"):
        assert on_cluster[key] == local[key], key
