"""The journal's workload activities are told by their provider's module (the run directory's
contract), never by their name: a fault named like the workload is still a fault, and the
workload's own start and stop are never faults, whatever they are called."""

from __future__ import annotations

import json
from pathlib import Path

from magnetar.common.run_directory import WORKLOAD_ACTIONS_MODULE, WORKLOAD_MODULES
from magnetar.spark.journal import read_faults
from magnetar.spark.synthetic import journal
from tests.spark.scenarios import GOLDEN

T = "2026-11-22T10:00:0{}+00:00"


def entry(name: str, module: str, second: int, kind: str = "action") -> dict[str, object]:
    activity = {"type": kind, "name": name, "provider": {"type": "python", "module": module, "func": "f"}}
    return {"activity": activity, "start": T.format(second), "end": T.format(second), "status": "succeeded"}


def faults_of(tmp_path: Path, runs: list[dict[str, object]]) -> list[str]:
    (tmp_path / "journal.json").write_text(json.dumps({"run": runs, "rollbacks": []}))
    found = read_faults(tmp_path)
    assert found is not None
    return [f.name for f in found]


def test_the_workload_module_is_the_contracts() -> None:
    assert WORKLOAD_MODULES == {WORKLOAD_ACTIONS_MODULE} == {"magnetar.chaos.workload.actions"}


def test_an_action_named_like_the_workload_from_another_module_is_a_fault(tmp_path: Path) -> None:
    runs = [
        entry("start-workload", WORKLOAD_ACTIONS_MODULE, 0),
        entry("kill-workload-broker", "magnetar.chaos.process.actions", 1),
        entry("workload", "chaosk8s.pod.actions", 2),
        entry("stop-workload", WORKLOAD_ACTIONS_MODULE, 3),
    ]
    assert faults_of(tmp_path, runs) == ["kill-workload-broker", "workload"]


def test_an_action_of_the_workload_module_is_not_a_fault_whatever_its_name(tmp_path: Path) -> None:
    runs = [
        entry("begin", WORKLOAD_ACTIONS_MODULE, 0),
        entry("unload-bundle", "magnetar.chaos.bundles.actions", 1),
        entry("kill-broker", WORKLOAD_ACTIONS_MODULE, 2),
    ]
    assert faults_of(tmp_path, runs) == ["unload-bundle"]


def test_a_module_that_only_contains_the_workloads_name_is_a_fault(tmp_path: Path) -> None:
    runs = [
        entry("a", "magnetar.chaos.workload.probes", 0),  # the probes' module, not the actions'
        entry("b", "my.workload.actions", 1),
        entry("c", WORKLOAD_ACTIONS_MODULE + "s", 2),
    ]
    assert faults_of(tmp_path, runs) == ["a", "b", "c"]


def test_an_activity_without_a_provider_module_is_a_fault(tmp_path: Path) -> None:
    runs: list[dict[str, object]] = [
        {"activity": {"type": "action", "name": "start-workload"}, "start": T.format(0)},
        {"activity": {"type": "action", "name": "x", "provider": "python"}, "start": T.format(1)},
        {"activity": {"type": "action", "name": "y", "provider": {"module": ["a"]}}, "start": T.format(2)},
    ]
    assert faults_of(tmp_path, runs) == ["start-workload", "x", "y"]


def test_the_golden_journals_workload_is_left_out_and_its_faults_kept(tmp_path: Path) -> None:
    runs = journal(GOLDEN, 1_800_000_000_000_000_000, 1_800_000_010_000_000_000)["run"]
    assert faults_of(tmp_path, runs) == [f.name for f in GOLDEN.faults]
