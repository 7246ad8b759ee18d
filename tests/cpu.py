"""What each test costs in CPU: its worker's own CPU and that of the processes it started (setup,
call and teardown), on its teardown's report as the user property ``cpu_s``; tests/timing.py adds
it up by tier and lists the heaviest tests.

A test's CPU is what the worker and its descendants (servers, clusters, CLIs, the Spark session's
JVM) used from the end of the test before to the end of its teardown: the worker's own CPU and that
of the children it reaped (``getrusage``), plus the growth of every descendant still running, read
from /proc. A process that outlives the test it started in (a module's cluster) charges each test
for what it used meanwhile. Not counted: processes that are nobody's descendant (pods, whose processes
belong to containerd; the kube node's control plane), and a process reaped by an intermediate
one that still runs. So the kube tier's figure is its host side only.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Generator
from pathlib import Path

import pytest

TICKS = os.sysconf("SC_CLK_TCK")


def _own_and_reaped() -> float:
    mine = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + reaped.ru_utime + reaped.ru_stime


def _processes() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds) of every process readable now: its threads' and that of the
    children it reaped, so a grandchild reaped by a running child stays counted."""
    found: dict[int, tuple[int, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        # the command name (field 2) is parenthesised and may hold spaces or parentheses
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(entry.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / TICKS)
    return found


def descendants_cpu(root: int) -> tuple[dict[int, float], set[int]]:
    """pid -> CPU seconds of every running descendant of ``root`` (not ``root`` itself), and the
    pids of every process running."""
    processes = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    cpu: dict[int, float] = {}
    pending = list(children.get(root, ()))
    while pending:
        pid = pending.pop()
        cpu[pid] = processes[pid][1]
        pending.extend(children.get(pid, ()))
    return cpu, set(processes)


class Snapshot:
    """The CPU used so far by this process, the children it reaped and its running descendants."""

    def __init__(self) -> None:
        self.own = _own_and_reaped()
        self.running, self.alive = descendants_cpu(os.getpid())

    def since(self, before: Snapshot) -> float:
        """CPU seconds used between ``before`` and this snapshot. A descendant that ended meanwhile
        is in ``own`` (or its reaping parent's figure) with its whole life's CPU, so what it had used
        by ``before`` comes off; one that left the tree alive (reparented) just stops counting."""
        grown = sum(cpu - before.running.get(pid, 0.0) for pid, cpu in self.running.items())
        reaped_earlier = sum(cpu for pid, cpu in before.running.items() if pid not in self.alive)
        return max(0.0, self.own - before.own + grown - reaped_earlier)


class Tests:
    """Each test is measured from the end of the one before (what pytest does between two tests
    goes to the next): one reading of /proc a test, and the tests add up to the worker's CPU."""

    def __init__(self) -> None:
        self.last: Snapshot | None = None

    def start(self) -> None:
        if self.last is None:  # the worker's first test: from its start (collection not counted)
            self.last = Snapshot()

    def measure(self) -> float:
        before = self.last or Snapshot()
        self.last = Snapshot()
        return self.last.since(before)


_tests = Tests()


def pytest_runtest_logstart() -> None:
    _tests.start()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "teardown":  # a copy: the item's list is shared by its three reports
        report.user_properties = [*report.user_properties, ("cpu_s", round(_tests.measure(), 3))]
    return report


def cpu_of(report: pytest.TestReport) -> float:
    """The CPU seconds of a report's test, on its teardown's report (0 on the others)."""
    value = next((value for key, value in report.user_properties if key == "cpu_s"), 0.0)
    return float(value) if isinstance(value, int | float) else 0.0
