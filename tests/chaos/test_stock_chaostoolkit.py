"""The stock Chaos Toolkit CLI (``chaos``, not ``magnetar chaos``) works with the lab:
``chaos discover magnetar --no-install`` lists the activities of every activity module, and a
plain ``chaos run`` of bundle-unload against a local cluster completes, its configuration coming
from the environment and ``--var`` (the keys every experiment declares), its event log in the
run directory given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chaos.eventlog import events
from tests.chaos.lab import EXPERIMENTS, ROOT
from tests.chaos.test_experiments import cluster  # noqa: F401  (the module-scoped one-region cluster)

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

#: the Chaos Toolkit CLI of the environment running the tests
CHAOS = Path(sys.executable).parent / "chaos"


def stock_chaos(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``chaos ARGS`` in ``cwd``, without the version check or the user's settings, and with no
    MAGNETAR_* variable but those of ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MAGNETAR_")}
    return subprocess.run(
        [str(CHAOS), "--no-version-check", "--settings", str(cwd / "settings.yaml"), *args],
        capture_output=True, text=True, timeout=300, cwd=cwd, env={**clean, **(env or {})},
    )  # fmt: skip


def providers() -> set[tuple[str, str]]:
    """``(module, func)`` of every Python activity the experiments (the lab's and the tests') use."""
    found = set()
    for path in [*EXPERIMENTS.glob("*.yaml"), *(ROOT / "tests" / "chaos" / "experiments").glob("*.yaml")]:
        experiment = yaml.safe_load(path.read_text())
        hypothesis = experiment.get("steady-state-hypothesis") or {}
        activities = [*hypothesis.get("probes", []), *experiment["method"], *experiment.get("rollbacks", [])]
        found |= {(a["provider"]["module"], a["provider"]["func"]) for a in activities}
    return found


def test_discover_lists_every_activity_module(cluster: Path, tmp_path: Path) -> None:  # noqa: F811
    result = stock_chaos(
        "discover", "magnetar", "--no-install", "--discovery-path", str(tmp_path / "discovery.json"),
        cwd=tmp_path, env={"MAGNETAR_CLUSTER_DIR": str(cluster)},
    )  # fmt: skip
    assert (tmp_path / "discovery.json").exists(), result.stdout + result.stderr  # `chaos` exits 0 anyway
    discovery: dict[str, Any] = json.loads((tmp_path / "discovery.json").read_text())
    assert discovery["extension"]["name"] == "magnetar"
    discovered = {(a["mod"], a["name"]) for a in discovery["activities"]}
    assert {module for module, _ in discovered} == {
        f"magnetar.chaos.{module}"
        for module in (
            "bundles.actions", "geo.actions", "pods.actions", "network.actions", "process.actions",
            "process.probes", "storage.probes", "topics.probes", "workload.actions", "workload.probes",
        )
    }  # fmt: skip
    assert ("magnetar.chaos.geo.actions", "move_consumers") in discovered
    assert ("magnetar.chaos.pods.actions", "delete_pod") in discovered
    assert ("magnetar.chaos.pods.actions", "kill_container") in discovered
    assert providers() <= discovered, "every activity an experiment names is discovered"
    kinds = {(a["mod"].rsplit(".", 1)[1], a["type"]) for a in discovery["activities"]}
    assert kinds == {("actions", "action"), ("probes", "probe")}
    system = discovery["system"]
    assert system["cluster_dir"] == str(cluster.resolve())
    assert {p["role"] for p in system["processes"]} >= {"bookie", "broker"}


def test_stock_run_of_bundle_unload(cluster: Path, tmp_path: Path) -> None:  # noqa: F811
    """The cluster through the environment, the run directory through ``--var``: the run
    completes with its hypothesis met before and after, and the workload's event log (no
    acknowledged message lost) is in that run directory."""
    run_dir = tmp_path / "runs" / "stock-unload"
    result = stock_chaos(
        "--log-file", str(tmp_path / "chaostoolkit.log"), "run",
        "--journal-path", str(tmp_path / "journal.json"), "--var", f"magnetar_run_dir={run_dir}",
        str(EXPERIMENTS / "bundle-unload.yaml"),
        cwd=tmp_path, env={"MAGNETAR_CLUSTER_DIR": str(cluster)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["status"] == "completed"
    assert journal["steady_states"]["before"]["steady_state_met"]
    assert journal["steady_states"]["after"]["steady_state_met"]
    assert all(r["status"] == "succeeded" for r in journal["run"])
    start = next(r for r in journal["run"] if r["activity"]["name"] == "start-workload")
    assert start["output"]["run_dir"] == str(run_dir)
    logged = events(run_dir)
    acked = {e["uid"] for e in logged if e["event"] == "send_ok"}
    received = {e["uid"] for e in logged if e["event"] == "receive"}
    assert acked, "the workload ran and wrote its event log in the run directory"
    assert acked <= received
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["stock-unload"], "and no other one"
