"""How the suite shares the machine when it runs on several workers (pytest-xdist, ``--dist
loadgroup``): which tests must stay together on one worker, and which go first.

- The kube tier is one group: a node of ``magnetar kube up`` owns the machine's bridge, so one
  runs at a time, and its tests run one after another on one worker.
- The operator's tests share one control plane (kube-apiserver and etcd, a session fixture): one
  group, so one worker starts it rather than each.
- Tests that share a module-scoped fixture (a cluster of a module) stay together, so the fixture
  starts once: one group per module and set of such fixtures (and their parameters).
- Every other test goes wherever a worker is free.

Longest first: the groups are ordered by what they took in the last run here (pytest's cache), so
the longest chain starts at once and the short ones fill in around it; without a cache, by a
guess from the markers. The durations are kept at the end of every run. (xdist would order the
groups by their number of tests; `make test` passes ``--no-loadscope-reorder`` to keep this order.)

Some tests judge timing under a fault (publishing resumes within 1 s of ZooKeeper's return): on
two cores shared with other workers' clusters they fail for want of CPU, not for a fault of the
system. They are marked ``exclusive``; ``--exclusive=skip`` leaves them out and
``--exclusive=only`` runs only them, and `make test` runs them in a pytest of their own, beside
the parallel part at CPU priority (tests/parts.py), or alone after it where that cannot be had.

How the groups reach xdist: its own ``xdist_group`` marks work by appending the group to a test's
node id, which pytest 9 no longer allows, so the workers write each test's group to a file the
controller named (``MAGNETAR_TEST_GROUPS``, inherited by the workers), and the controller's
scheduler (xdist's loadscope, one scope a group) reads it once every worker has collected.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

CACHE_KEY = "magnetar/durations"
#: seconds assumed for a test the cache has never seen, by its markers
GUESS_S = {"kube": 30.0, "slow": 15.0}
#: session fixtures that cost enough to start (CPU, memory) that their tests keep to one worker
SESSION_GROUPS = {"control_plane": "operator-control-plane"}
DEFAULT_GUESS_S = 1.0
TESTS = Path(__file__).resolve().parent
GROUPS_FILE = "MAGNETAR_TEST_GROUPS"


def group_of(item: pytest.Item) -> str | None:
    """The xdist group ``item`` must share a worker with, or None if it may run anywhere."""
    if TESTS / "kube" in Path(str(item.path)).parents:
        return "kube-node"
    fixtures = getattr(item, "fixturenames", ())
    for fixture, group in SESSION_GROUPS.items():
        if fixture in fixtures:
            return group
    definitions: dict[str, Any] = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    shared = sorted(
        name
        for name in fixtures
        if name in definitions and definitions[name][-1].scope in ("module", "class", "package")
    )
    if not shared:
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    key = ",".join(f"{name}={params[name]}" if name in params else name for name in shared)
    return f"{item.nodeid.split('::', 1)[0]}[{key}]"


def _guess(item: pytest.Item) -> float:
    return max((s for m, s in GUESS_S.items() if item.get_closest_marker(m)), default=DEFAULT_GUESS_S)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--exclusive",
        choices=("run", "skip", "only"),
        default="run",
        help="tests marked exclusive (timing under a fault, to run with no other test taking their CPU): run "
        "them with the rest (default), leave them out (skip), or run only them (only)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects by ``--exclusive``, then groups and orders for xdist."""
    choice = config.getoption("exclusive")
    if choice != "run":
        wanted = choice == "only"
        kept = [item for item in items if bool(item.get_closest_marker("exclusive")) == wanted]
        dropped = [item for item in items if bool(item.get_closest_marker("exclusive")) != wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    if _grouping(config):
        _group_and_order(config, items)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # `make test`'s exclusive part of a run that selected none of them has nothing to do.
    if session.config.getoption("exclusive") == "only" and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


def _grouping(config: pytest.Config) -> bool:
    # The controller has ``dist``; a worker is told by ``loadgroup`` (xdist sets dist "no" there).
    return bool(config.getvalue("dist") == "loadgroup" or getattr(config.option, "loadgroup", False))


def _group_and_order(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache = getattr(config, "cache", None)
    known: dict[str, float] = cache.get(CACHE_KEY, {}) if cache is not None else {}
    units: dict[str, list[pytest.Item]] = defaultdict(list)
    groups: dict[str, str] = {}
    for item in items:
        group = group_of(item)
        if group is not None:
            groups[item.nodeid] = group
        units[group or item.nodeid].append(item)

    def cost(unit: list[pytest.Item]) -> float:
        return sum(known.get(i.nodeid, _guess(i)) for i in unit)

    # Stable: equal costs keep the collection's order (and every worker sorts the same way).
    ordered = sorted(units.values(), key=cost, reverse=True)
    items[:] = [item for unit in ordered for item in unit]
    target = os.environ.get(GROUPS_FILE)
    if target and hasattr(config, "workerinput"):
        partial = Path(f"{target}.{config.workerinput['workerid']}")
        partial.write_text(json.dumps(groups))
        partial.replace(target)  # whole, whichever worker writes last: they collect the same


class GroupScheduling(LoadScopeScheduling):
    """xdist's loadscope with this file's groups as its scopes."""

    def __init__(self, config: pytest.Config, log: Any, groups_file: Path) -> None:
        super().__init__(config, log)
        self._groups_file = groups_file
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first asked once every worker has collected (and written)
            self._groups = json.loads(self._groups_file.read_text() or "{}")
        return self._groups.get(nodeid, nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    return GroupScheduling(config, log, Path(os.environ[GROUPS_FILE]))


class Durations:
    """Each passed test's time in this run (setup, call and teardown), kept in the cache at its
    end; a test that failed or was skipped says nothing of how long it takes."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.seconds: dict[str, float] = defaultdict(float)
        self.passed: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration
        if report.when == "call" and report.passed:
            self.passed.add(report.nodeid)

    def pytest_sessionfinish(self) -> None:
        cache = getattr(self.config, "cache", None)  # None under -p no:cacheprovider
        if cache is None or not self.passed:
            return
        known = dict(cache.get(CACHE_KEY, {}))
        known.update({nodeid: self.seconds[nodeid] for nodeid in self.passed})
        cache.set(CACHE_KEY, known)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    config.pluginmanager.register(Durations(config), "magnetar-durations")
    if config.getvalue("dist") == "loadgroup":
        handle, name = tempfile.mkstemp(prefix="magnetar-test-groups-", suffix=".json")
        os.close(handle)
        os.environ[GROUPS_FILE] = name  # before the workers start: they inherit it


def pytest_unconfigure(config: pytest.Config) -> None:
    name = os.environ.get(GROUPS_FILE)
    if name and not hasattr(config, "workerinput"):
        Path(name).unlink(missing_ok=True)
