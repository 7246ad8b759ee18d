"""Helpers the benchmarks share: percentiles, CPU time of a process, ``magnetar standalone``
processes started and stopped by PID, and the JSON results file.

Scripts import it as ``from common import …`` (bench/ is on ``sys.path`` when a script in it runs).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: where benchmarks that follow the project rule write their JSON (git-ignored)
RUNS = Path(__file__).resolve().parent.parent / "runs" / "bench"
READY = re.compile(
    r"standalone ready service_url=(\S+) web_service_url=(\S+)"
    r"(?: service_url_tls=(\S+) web_service_url_tls=(\S+))?"
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used (Linux /proc)."""
    return sum(cpu_user_system(pid))


def cpu_user_system(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds a process has used (Linux /proc, all its threads)."""
    return cpu_user_system_of(Path(f"/proc/{pid}/stat"))


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """User and system CPU seconds of each of a process's threads, by thread id (Linux /proc)."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found[int(task.name)] = sum(cpu_user_system_of(task / "stat"))
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended while listed
    return found


def cpu_user_system_of(stat: Path) -> tuple[float, float]:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def machine_ticks() -> tuple[int, int, int]:
    """(busy, iowait, total) clock ticks of all CPUs since boot (Linux /proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle, iowait = values[3], values[4]
    return sum(values) - idle - iowait, iowait, sum(values)


def stop_process(process: subprocess.Popen[Any], timeout_s: float = 30) -> None:
    """SIGTERM to this one PID, then SIGKILL if it is still there after ``timeout_s``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@dataclass
class Processes:
    """Every process a benchmark starts, stopped by PID when the block ends (error or Ctrl-C
    included); SIGTERM to the benchmark itself ends the block the same way."""

    started: list[subprocess.Popen[Any]] = field(default_factory=list)

    def add(self, process: subprocess.Popen[Any]) -> subprocess.Popen[Any]:
        self.started.append(process)
        return process

    def stop_all(self) -> None:
        for process in reversed(self.started):
            stop_process(process)
        self.started.clear()


@contextmanager
def processes() -> Iterator[Processes]:
    group = Processes()

    def on_term(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield group
    finally:
        group.stop_all()
        signal.signal(signal.SIGTERM, previous)


def start_noop(
    group: Processes, cert: Path | None = None, key: Path | None = None
) -> tuple[subprocess.Popen[str], str, str]:
    """bench/noop_broker.py (a broker that stores nothing: the floor of a load generator), with a
    TLS port too given ``cert`` and ``key``; (process, pulsar:// URL, pulsar+ssl:// URL or "")."""
    command = [sys.executable, str(Path(__file__).parent / "noop_broker.py")]
    if cert is not None and key is not None:
        command += ["--cert", str(cert), "--key", str(key)]
    process = group.add(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("noop ready") and not found:
                found.append(line)
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    ready.wait(30)
    if not found:
        raise RuntimeError("bench/noop_broker.py did not start")
    fields = dict(part.split("=", 1) for part in found[0].split()[2:])
    return process, fields["service_url"], fields.get("service_url_tls", "")


@dataclass
class Standalone:
    """A running ``magnetar standalone`` and the URLs of its ready line."""

    process: subprocess.Popen[str]
    service_url: str
    web_service_url: str
    #: pulsar+ssl:// and https:// URLs when TLS ports were asked for ("" otherwise)
    service_url_tls: str = ""
    web_service_url_tls: str = ""
    #: launch to the ready line
    start_s: float = 0.0

    def stop(self) -> None:
        stop_process(self.process)


def start_standalone(
    data_dir: Path,
    settings: dict[str, object] | None = None,
    *,
    group: Processes | None = None,
    log_level: str = "WARNING",
    timeout_s: float = 60,
) -> Standalone:
    """``magnetar standalone --port 0 --web-port 0`` with ``--set key=value`` for each setting;
    returns once it printed its ready line (its log: ``data_dir``/standalone.log)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "magnetar", "standalone", "--data-dir", str(data_dir),
        "--port", "0", "--web-port", "0", "--log-level", log_level,
    ]  # fmt: skip
    for key, value in (settings or {}).items():
        command += ["--set", f"{key}={value}"]
    log = data_dir / "standalone.log"
    start = time.perf_counter()
    with log.open("a") as stderr:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    if group is not None:
        group.add(process)
    found: list[re.Match[str]] = []
    ready = threading.Event()

    def read() -> None:  # keeps draining stdout so the process never blocks on it
        assert process.stdout is not None
        for line in process.stdout:
            match = READY.search(line)
            if match and not found:
                found.append(match)
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    ready.wait(timeout_s)
    if not found:
        stop_process(process)
        raise RuntimeError(f"standalone did not start; see {log}:\n{log.read_text()[-2000:]}")
    match = found[0]
    return Standalone(
        process, match.group(1), match.group(2), match.group(3) or "", match.group(4) or "",
        time.perf_counter() - start,
    )  # fmt: skip


def write_results(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path
