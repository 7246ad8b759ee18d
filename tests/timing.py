"""Where `make test`'s time goes: a table at the end of the run with each tier's tests, their time
and its share of the total, and how busy the machine was.

A tier is a folder under ``tests/`` (``broker/e2e``, ``spark``, ...). A test's time is its setup,
call and teardown, so a module's shared cluster counts in the tier that starts it. With several
workers (pytest-xdist) the tiers' times add up to more than the run's wall time: the table says
both. The machine's CPU comes from /proc/stat, so it counts every process the tests started.
Under `make test` (or `make check`) it also says how long make has run so far and how much of it
came before this pytest (install, the kube tier's builds, lint, types, and under `make test` the
first pytest for the second: make passes its start in ``MAGNETAR_MAKE_STARTED``).

Beside each tier's time, its CPU (each test's worker and the processes it started, tests/cpu.py);
then when each worker's last test ended, and the heaviest tests by CPU. Every test's worker, start,
end and CPU are kept in pytest's cache (``.pytest_cache/v/magnetar/timeline``).
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cpu import cpu_of

#: how many of the heaviest tests (by CPU) the table lists
HEAVIEST = 25
#: where the last run's timeline is kept in pytest's cache
TIMELINE_KEY = "magnetar/timeline"


@dataclass
class Tier:
    tests: set[str] = field(default_factory=set)
    seconds: float = 0.0
    cpu_s: float = 0.0
    failed: int = 0


def _busy_and_total_jiffies() -> tuple[int, int] | None:
    """The machine's CPU time so far, busy and in all (the first line of /proc/stat)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def tier_of(nodeid: str) -> str:
    """``tests/broker/e2e/test_x.py::test`` -> ``broker/e2e``; ``tests/broker/test_y.py`` -> ``broker``."""
    path = Path(nodeid.split("::", 1)[0])
    parts = path.parts[1:-1] if path.parts and path.parts[0] == "tests" else path.parts[:-1]
    return "/".join(parts[:2]) or "(top)"


class TierTimes:
    def __init__(self) -> None:
        self.tiers: dict[str, Tier] = defaultdict(Tier)
        self.started = time.monotonic()
        self.started_at = time.time()
        self.jiffies = _busy_and_total_jiffies()
        #: node id -> its CPU seconds (on its teardown's report: tests/cpu.py)
        self.cpu: dict[str, float] = defaultdict(float)
        #: node id -> [worker, its setup's start, its teardown's end] (epoch seconds)
        self.spans: dict[str, list[Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        tier = self.tiers[tier_of(report.nodeid)]
        tier.tests.add(report.nodeid)
        tier.seconds += report.duration
        cpu = cpu_of(report)
        tier.cpu_s += cpu
        self.cpu[report.nodeid] += cpu
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
        span = self.spans.setdefault(report.nodeid, [worker, report.start, report.stop])
        span[1], span[2] = min(span[1], report.start), max(span[2], report.stop)
        if report.failed:
            tier.failed += 1

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.tiers:
            return
        wall = time.monotonic() - self.started
        summed = sum(t.seconds for t in self.tiers.values()) or 1.0
        write = terminalreporter.write_line
        terminalreporter.section("time by tier")
        cpu = sum(t.cpu_s for t in self.tiers.values()) or 1.0
        write(f"{'tier':<22} {'tests':>6} {'time':>9} {'share':>6} {'CPU':>9} {'share':>6}  failed")
        for name, tier in sorted(self.tiers.items(), key=lambda kv: -kv[1].seconds):
            write(
                f"{name:<22} {len(tier.tests):>6} {_minutes(tier.seconds):>9} "
                f"{tier.seconds / summed:>6.1%} {_minutes(tier.cpu_s):>9} {tier.cpu_s / cpu:>6.1%}"
                f"  {tier.failed or ''}"
            )
        count = sum(len(t.tests) for t in self.tiers.values())
        write(f"{'all':<22} {count:>6} {_minutes(summed):>9} {1:>6.0%} {_minutes(cpu):>9} {1:>6.0%}")
        write("CPU: each test's worker and the processes it started, not pods or the node (tests/cpu.py)")
        line = f"pytest's wall time {_minutes(wall)}"
        make_started = os.environ.get("MAGNETAR_MAKE_STARTED", "")
        if make_started.isdigit():
            before = self.started_at - int(make_started)
            goals = os.environ.get("MAGNETAR_MAKE_GOALS", "test")
            total = _minutes(before + wall)
            # `make test` runs pytest twice (the exclusive tests beside the rest or after it): "so far"
            line = f"make {goals} so far {total}: before this pytest {_minutes(before)}, {line}"
        now = _busy_and_total_jiffies()
        if self.jiffies and now and now[1] > self.jiffies[1]:
            busy = (now[0] - self.jiffies[0]) / (now[1] - self.jiffies[1])
            cores = os.cpu_count() or 1
            line += f"; the machine's {cores} cores {busy:.0%} busy ({busy * cores * wall / 60:.1f} core-min)"
        write(line)
        ends = self._worker_ends()
        if len(ends) > 1:
            write("each worker's last test ended after " + ", ".join(f"{w} {_minutes(e)}" for w, e in ends))
        self._heaviest(terminalreporter)
        self._keep_timeline(terminalreporter.config)

    def _worker_ends(self) -> list[tuple[str, float]]:
        """Each worker's last teardown, in seconds after pytest's start: a worker that ends long
        before the others is a core idle for the rest of the run."""
        ends: dict[str, float] = {}
        for worker, _, stop in self.spans.values():
            ends[worker] = max(ends.get(worker, 0.0), stop - self.started_at)
        return sorted(ends.items(), key=lambda kv: kv[1])

    def _keep_timeline(self, config: pytest.Config) -> None:
        """Every test's worker, start, end (seconds after pytest's start) and CPU, in pytest's cache
        (``.pytest_cache/v/magnetar/timeline``) for a look at what ran beside what."""
        cache = getattr(config, "cache", None)
        if cache is None:
            return
        timeline = [
            [nodeid, worker, round(start - self.started_at, 2), round(stop - self.started_at, 2),
             round(self.cpu.get(nodeid, 0.0), 2)]
            for nodeid, (worker, start, stop) in sorted(self.spans.items(), key=lambda kv: kv[1][1])
        ]  # fmt: skip
        cache.set(TIMELINE_KEY, timeline)

    def _heaviest(self, terminalreporter: pytest.TerminalReporter) -> None:
        heaviest = sorted(self.cpu.items(), key=lambda kv: -kv[1])[:HEAVIEST]
        if not heaviest or heaviest[0][1] <= 0:
            return
        terminalreporter.section(f"heaviest {len(heaviest)} tests by CPU (setup, call and teardown)")
        for nodeid, seconds in heaviest:
            terminalreporter.write_line(f"{seconds:8.1f} core-s  {nodeid}")


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def pytest_configure(config: pytest.Config) -> None:
    # Under xdist the controller sees every worker's reports; the workers need no table.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(TierTimes(), "magnetar-tier-times")
