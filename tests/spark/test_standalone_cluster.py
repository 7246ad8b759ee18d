"""The post-mortem on a Spark cluster, not only local mode (issue 18): a real standalone master
and worker started from the installed pyspark (``spark-class …Master`` / ``…Worker`` on
loopback), ``magnetar postmortem --master spark://…`` run against them as a user would, and the
same summary as local mode gives for the same run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from magnetar.spark.cli import EXIT_LOSS
from tests.spark.conftest import Analysed

pytestmark = pytest.mark.slow

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
REGISTERED = "Successfully registered with master"
_LOOPBACK = ("--host", "127.0.0.1", "--webui-port", "0")


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "PYSPARK_PYTHON": sys.executable,
    }


def _daemon(log: Path, *args: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,  # spark-class execs java: its group is stopped as one
        )


def _wait_for(log: Path, pattern: re.Pattern[str] | str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        found = re.search(pattern, text)
        if found:
            return found.group(1) if found.groups() else found.group(0)
        time.sleep(0.5)
    raise AssertionError(f"{log.name}: no {pattern!r} within {timeout_s} s:\n{text[-2000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def standalone_master(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Spark standalone master with one worker (2 cores, 2 GB); its URL and the worker's log."""
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    master = _daemon(master_log, "org.apache.spark.deploy.master.Master", *_LOOPBACK, "--port", "0")
    processes = [master]
    try:
        url = _wait_for(master_log, MASTER_URL)
        worker = ["--cores", "2", "--memory", "2g", "--work-dir", str(tmp_path / "work")]
        processes.append(
            _daemon(worker_log, "org.apache.spark.deploy.worker.Worker", url, *_LOOPBACK, *worker)
        )
        _wait_for(worker_log, REGISTERED)
        yield url, worker_log
    finally:
        for process in reversed(processes):
            _stop(process)


def test_the_post_mortem_on_a_standalone_cluster_matches_local_mode(
    golden: Analysed, standalone_master: tuple[str, Path], tmp_path: Path
) -> None:
    url, worker_log = standalone_master
    out = tmp_path / "report"
    command = [sys.executable, "-m", "magnetar", "postmortem", str(golden.run_dir), "--master", url]
    finished = subprocess.run(
        [*command, "--out", str(out)], capture_output=True, text=True, timeout=600, env=_env()
    )
    # the golden run has two losses: the post-mortem reports them and says so in its exit status
    assert finished.returncode == EXIT_LOSS, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert "launch executor" in worker_log.read_text(), "the cluster's worker ran the job"
    on_cluster = json.loads((out / "summary.json").read_text())
    local = golden.result.summary
    for key in ("headline", "faults", "windows", "duplicates", "losses", "reorders", "bad_lines"):
        assert on_cluster[key] == local[key], key
