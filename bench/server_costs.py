"""What a local cluster's servers pay for a workload: CPU per message, event-loop lateness, stalls,
garbage collections, and (on request) a py-spy profile of each.

CPU is each process's user + system time from /proc (all its threads) between two readings, with
the system part's share beside it (the kernel's work: socket calls, the loopback's TCP, fsync);
lateness and stalls are the difference of two scrapes of ``magnetar_event_loop_lag_seconds``,
``magnetar_event_loop_slow_callbacks_total`` and ``magnetar_gc_pause_seconds`` (see
magnetar/common/loop_monitor.py). ZooKeeper has CPU only.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import cpu_user_system, thread_cpu_seconds
from histograms import buckets, delta, histogram_sum, quantile, scrape, worst_bucket
from rich.console import Console
from rich.table import Table

from magnetar.local.supervisor import ClusterState

LAG = "magnetar_event_loop_lag_seconds"
GC = "magnetar_gc_pause_seconds"
SLOW = "magnetar_event_loop_slow_callbacks_total"


@dataclass(frozen=True)
class Server:
    name: str
    pid: int
    #: its /metrics page; None for ZooKeeper
    metrics_url: str | None


def bookie_metrics(log: Path) -> str:
    """The /metrics URL a bookie printed (``bookie metrics http://…``) in its log."""
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("bookie metrics "):
            return line.split()[-1]
    raise RuntimeError(f"{log}: the bookie printed no metrics URL")


def servers(state: ClusterState) -> list[Server]:
    found = [Server(b.name, b.pid, f"{b.endpoints['web_service_url']}/metrics") for b in state.find("broker")]
    found += [Server(b.name, b.pid, bookie_metrics(Path(b.log))) for b in state.find("bookie")]
    found += [Server(z.name, z.pid, None) for z in state.find("zookeeper")]
    return found


CpuReading = tuple[float, dict[str, tuple[float, float]]]
ThreadCpu = dict[str, dict[int, float]]
#: py-spy's samples a second (``start_profiles``)
PROFILE_RATE = 200


def cpu(group: list[Server]) -> CpuReading:
    """(now, (user, system) CPU seconds of each server so far)."""
    return time.monotonic(), {server.name: cpu_user_system(server.pid) for server in group}


def thread_cpu(group: list[Server]) -> ThreadCpu:
    """CPU seconds of each server's threads so far, by thread id."""
    return {server.name: thread_cpu_seconds(server.pid) for server in group}


def thread_cpu_used(before: ThreadCpu, after: ThreadCpu) -> dict[str, dict[str, float]]:
    """Each thread's CPU seconds between two readings (a thread started since counts from 0);
    thread ids as strings, as they come back from JSON."""
    return {name: {str(tid): used - before.get(name, {}).get(tid, 0.0) for tid, used in threads.items()}
            for name, threads in after.items()}  # fmt: skip


def cpu_rows(
    group: list[Server], before: CpuReading, after: CpuReading, messages: int
) -> list[dict[str, Any]]:
    """Per server and in total: cores used, microseconds of CPU per message, the system share."""
    elapsed = after[0] - before[0]
    rows = []
    for server in group:
        user = after[1][server.name][0] - before[1][server.name][0]
        system = after[1][server.name][1] - before[1][server.name][1]
        rows.append(_cpu_row(server.name, user, system, elapsed, messages))
    user, system = sum(r["user_s"] for r in rows), sum(r["system_s"] for r in rows)
    return [*rows, {**_cpu_row("all servers", user, system, elapsed, messages), "messages": messages}]


def _cpu_row(name: str, user: float, system: float, elapsed: float, messages: int) -> dict[str, Any]:
    used = user + system
    return {"server": name, "cpu_s": used, "user_s": user, "system_s": system, "cores": used / elapsed,
            "us_per_message": used / messages * 1e6 if messages else None,
            "system_share": system / used if used else None, "seconds": elapsed}  # fmt: skip


def loop_rows(group: list[Server], before: dict[str, str], after: dict[str, str]) -> list[dict[str, Any]]:
    """Each server's loop over the window: lateness p99 and worst bucket, stalls by callback, and
    collections (count and total pause) by generation. ``before``/``after``: pages by URL."""
    rows = []
    for server in group:
        if server.metrics_url is None:
            continue
        first, last = before[server.metrics_url], after[server.metrics_url]
        if f"{LAG}_bucket" not in last:
            continue  # a build from before the loop monitor: its CPU is still measured
        lag = delta(buckets(last, LAG), buckets(first, LAG))
        collections, gc_ms = {}, {}
        for generation in range(3):
            label = f'generation="{generation}"'
            moved = delta(buckets(last, GC, label + ","), buckets(first, GC, label + ","))
            collections[generation] = moved[-1][1]
            gc_ms[generation] = (histogram_sum(last, GC, label) - histogram_sum(first, GC, label)) * 1000
        rows.append({
            "server": server.name, "samples": int(lag[-1][1]), "lag_p99_ms": quantile(lag, 0.99),
            "lag_max_ms_at_most": worst_bucket(lag), "stalls": _stalls(first, last),
            "collections": collections, "gc_pause_ms": gc_ms,
        })  # fmt: skip
    return rows


def _stalls(first: str, last: str) -> dict[str, int]:
    def counts(text: str) -> dict[str, float]:
        return {
            name: float(v) for name, v in re.findall(rf'^{SLOW}{{callback="([^"]*)"}} (\S+)$', text, re.M)
        }

    earlier = counts(first)
    moved = {name: int(v - earlier.get(name, 0.0)) for name, v in counts(last).items()}
    return {name: n for name, n in sorted(moved.items(), key=lambda kv: -kv[1]) if n}


Profiling = list[tuple[subprocess.Popen[bytes], Path]]


def start_profiles(group: list[Server], seconds: float, directory: Path) -> Profiling:
    """py-spy on every Python server for ``seconds`` (``PROFILE_RATE``), each thread's stacks apart,
    as collapsed stacks (``--format raw``: a line per stack, its count last). py-spy's "idle"
    judgement is not to be trusted here (an event loop waiting in epoll is sampled as running):
    bench/cpu_stages.py weighs the samples by each thread's CPU time.
    Without native frames and without pausing the process: py-spy's native unwinding stops the
    process for each sample, and the loop falls seconds behind."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit("--profile needs py-spy: pip install 'magnetar[bench]'")
    directory.mkdir(parents=True, exist_ok=True)
    started = []
    for server in group:
        if server.metrics_url is None:
            continue
        out = directory / f"{server.name}-{time.strftime('%Y%m%dT%H%M%S')}.txt"
        command = [spy, "record", "--pid", str(server.pid), "--rate", str(PROFILE_RATE), "--nonblocking",
                   "--threads", "--format", "raw", "--duration", str(int(seconds)), "--output", str(out),
                   ]  # fmt: skip
        started.append((subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), out))
    return started


def finish_profiles(started: Profiling) -> list[str]:
    paths = []
    for process, out in started:
        _, err = process.communicate(timeout=120)
        if process.returncode != 0:
            raise RuntimeError(f"py-spy failed for {out.name}: {err.decode(errors='replace')[-500:]}")
        paths.append(str(out))
    return paths


def print_tables(console: Console, cpu: list[dict[str, Any]], loops: list[dict[str, Any]]) -> None:
    total = cpu[-1]
    title = f"what the servers paid: {total['messages']:,} messages in {total['seconds']:.1f} s"
    table = Table("server", "CPU s", "cores", "µs CPU per message", "of it in the kernel", title=title)
    for row in cpu:
        per = "—" if row["us_per_message"] is None else f"{row['us_per_message']:.0f}"
        kernel = "—" if row["system_share"] is None else f"{row['system_share']:.0%}"
        table.add_row(row["server"], f"{row['cpu_s']:.2f}", f"{row['cores']:.2f}", per, kernel)
    console.print(table)
    columns = ("server", "samples", "lag p99 ms", "worst ≤ ms", "GCs 0/1/2", "GC ms 0/1/2", "stalls > 10 ms")
    table = Table(*columns, title="event loops over the same seconds")
    for row in loops:
        stalls = ", ".join(f"{name} ×{n}" for name, n in list(row["stalls"].items())[:3]) or "none"
        gcs = "/".join(f"{int(n)}" for n in row["collections"].values())
        gc_ms = "/".join(f"{ms:.0f}" for ms in row["gc_pause_ms"].values())
        lag = (_ms(row["lag_p99_ms"]), _ms(row["lag_max_ms_at_most"]))
        table.add_row(row["server"], str(row["samples"]), *lag, gcs, gc_ms, stalls)
    console.print(table)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


class LagWatch:
    """The worst event-loop lag among some servers, step by step: ``with watch.step(name):``
    scrapes their pages before and after, and keeps the worst server's p99 and worst bucket."""

    def __init__(self, metrics_urls: list[str]) -> None:
        self.metrics_urls = metrics_urls
        self.steps: dict[str, dict[str, float | None]] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        if not self.metrics_urls:
            yield
            return
        before = {url: scrape(url) for url in self.metrics_urls}
        yield
        windows = [delta(buckets(scrape(url), LAG), buckets(before[url], LAG)) for url in self.metrics_urls]
        p99s = [p for p in (quantile(w, 0.99) for w in windows) if p is not None]
        worst = [w for w in (worst_bucket(w) for w in windows) if w is not None]
        self.steps[name] = {
            "lag_p99_ms": max(p99s, default=None),
            "lag_max_ms_at_most": max(worst, default=None),
        }
