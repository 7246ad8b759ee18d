"""A Spark standalone cluster on loopback, from the installed pyspark: one master and one worker
(``spark-class org.apache.spark.deploy.master.Master`` / ``…worker.Worker``), for the tests and
the benchmark that check the post-mortem on a real cluster rather than local mode.

Each daemon is started in its own process group (spark-class execs java) and stopped by that
group, so nothing outlives the ``with`` block, and nothing else is touched.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
REGISTERED = "Successfully registered with master"
_LOOPBACK = ("--host", "127.0.0.1", "--webui-port", "0")


@dataclass(frozen=True)
class Standalone:
    url: str  # spark://127.0.0.1:PORT
    worker_log: Path

    def executors_launched(self) -> int:
        """How many executors the worker has launched so far (one per application)."""
        return self.worker_log.read_text(errors="replace").count("launch executor")


def spark_env() -> dict[str, str]:
    """The environment for the daemons and for a driver of this cluster: this pyspark, loopback,
    and this interpreter for the executors' Python workers."""
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        # the master and worker schedule, they do not compute: the JIT's first tier is enough
        "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "PYSPARK_PYTHON": sys.executable,
    }


@contextmanager
def standalone(workdir: Path, cores: int = 2, memory: str = "2g") -> Iterator[Standalone]:
    """A master and one worker of ``cores`` and ``memory``, logs and work in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    master_log, worker_log = workdir / "master.log", workdir / "worker.log"
    processes = [_daemon(master_log, "org.apache.spark.deploy.master.Master", *_LOOPBACK, "--port", "0")]
    try:
        url = _wait_for(master_log, MASTER_URL)
        worker = ["--cores", str(cores), "--memory", memory, "--work-dir", str(workdir / "work")]
        processes.append(
            _daemon(worker_log, "org.apache.spark.deploy.worker.Worker", url, *_LOOPBACK, *worker)
        )
        _wait_for(worker_log, REGISTERED)
        yield Standalone(url, worker_log)
    finally:
        for process in reversed(processes):
            _stop(process)


def _daemon(log: Path, *args: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=spark_env(),
            start_new_session=True,  # spark-class execs java: its group is stopped as one
        )


def _wait_for(log: Path, pattern: re.Pattern[str] | str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        found = re.search(pattern, text)
        if found:
            return found.group(1) if found.groups() else found.group(0)
        time.sleep(0.5)
    raise RuntimeError(f"{log}: no {pattern!r} within {timeout_s} s:\n{text[-2000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
