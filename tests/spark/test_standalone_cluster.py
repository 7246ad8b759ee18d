"""The post-mortem on a Spark cluster, not only local mode: a real standalone master
and worker started from the installed pyspark (``spark-class …Master`` / ``…Worker`` on
loopback, see magnetar.spark.standalone), ``magnetar postmortem --master spark://…`` run against
them as a user would, and the same summary as local mode gives for the same run, named by path or
by ``file://`` URI."""

from __future__ import annotations

import json
import shutil
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


def test_the_post_mortem_on_a_standalone_cluster_matches_local_mode(
    golden: Analysed, standalone_master: Standalone, tmp_path: Path
) -> None:
    # One `magnetar postmortem` for two copies of the golden run, one named by path and one by
    # file:// URI (its report then goes to a URI too): one driver and one executor, as a user
    # analysing several runs gets.
    runs = {}
    for named_by in ("path", "uri"):
        copy = tmp_path / named_by / "run"
        shutil.copytree(golden.run_dir, copy, ignore=shutil.ignore_patterns("report"))
        runs[named_by] = copy.as_uri() if named_by == "uri" else str(copy)
    launched = standalone_master.executors_launched()
    command = [
        sys.executable,
        "-m",
        "magnetar",
        "postmortem",
        *runs.values(),
        "--master",
        standalone_master.url,
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600, env=spark_env())
    # the golden run has two losses: the post-mortem reports them and says so in its exit status
    assert finished.returncode == EXIT_LOSS, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert standalone_master.executors_launched() > launched, "the cluster's worker ran the job"
    local = golden.result.summary
    for named_by, run in runs.items():
        on_cluster = json.loads((tmp_path / named_by / "run" / "report" / "summary.json").read_text())
        assert on_cluster["run_dir"] == run, named_by
        for key in ("headline", "faults", "windows", "duplicates", "losses", "reorders", "bad_lines"):
            assert on_cluster[key] == local[key], (named_by, key)
