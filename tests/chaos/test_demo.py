"""`make demo` end to end (the command it runs, with two of its experiments to keep CI short): a
local two-region cluster comes up, the experiments run with a real workload, the cluster goes
down, and each run's Spark post-mortem report and headline are printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from magnetar.chaos.local.supervisor import alive

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)  # a cluster, two experiments, two Spark jobs: minutes on a busy 2-core machine
def test_demo_runs_experiments_on_two_regions_and_writes_the_postmortems(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "magnetar", "chaos", "demo",
         "--experiment", "bundle-unload", "--experiment", "replicated-subscription-failover",
         "--cluster-file", str(ROOT / "examples" / "two-regions.yaml")],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert output.count("no acknowledged message lost") == 2, output[-4000:]
    assert "losses" in output  # a row of the headline table
    (unload,) = (tmp_path / "runs").glob("demo-*-bundle-unload")
    (failover,) = (tmp_path / "runs").glob("demo-*-replicated-subscription-failover")
    for run_dir in (unload, failover):
        summary = json.loads((run_dir / "report" / "summary.json").read_text())
        assert summary["headline"]["losses"] == 0
        assert summary["headline"]["events"] > 1000
        assert (run_dir / "report" / "report.html").stat().st_size > 10_000
        journal = json.loads((run_dir / "journal.json").read_text())
        assert journal["status"] == "completed"
        assert journal["steady_states"]["before"]["steady_state_met"]
        assert journal["steady_states"]["after"]["steady_state_met"]
        assert all(r["status"] == "succeeded" for r in journal["run"])
    # The consumer really moved region, and the post-mortem tells its failover duplicates from
    # same-region redeliveries as the event log does: a few snapshot intervals (100 ms here)
    # of messages at most.
    logged = _events(failover)
    assert any(e["event"] == "switch_cluster" for e in logged)
    headline = json.loads((failover / "report" / "summary.json").read_text())["headline"]
    same, cross = _duplicates(logged)
    assert (headline["duplicates_same_region"], headline["duplicates_cross_region"]) == (same, cross)
    assert same + cross < sum(1 for e in logged if e["event"] == "receive") // 10
    cluster = tmp_path / "runs" / unload.name.removesuffix("-bundle-unload") / "cluster"
    state = json.loads((cluster / "state.json").read_text())
    assert {p["region"] for p in state["processes"] if p["role"] == "broker"} == {"jp-east", "jp-west"}
    pids = [p["pid"] for p in state["processes"]]
    assert pids
    assert not any(alive(pid) for pid in pids), "the demo stops every process it started"


def _events(run_dir: Path) -> list[dict[str, Any]]:
    files = (run_dir / "events").glob("*.jsonl")
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def _duplicates(logged: list[dict[str, Any]]) -> tuple[int, int]:
    """(same-region, cross-region) receipts after a uid's first one, per subscription (DESIGN §6)."""
    first: dict[tuple[str, str], str] = {}
    same = cross = 0
    for e in sorted((e for e in logged if e["event"] == "receive"), key=lambda e: int(e["ts"])):
        key = (str(e["subscription"]), str(e["uid"]))
        if key not in first:
            first[key] = str(e["cluster"])
        elif first[key] == str(e["cluster"]):
            same += 1
        else:
            cross += 1
    return same, cross
