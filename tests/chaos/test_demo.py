"""`make demo` end to end (the command it runs, with one of its experiments to keep CI short): a
local two-region cluster comes up, a consumer fails over between the regions under a real
workload, the cluster goes down, and the Spark post-mortem's report and headline are printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from magnetar.local.supervisor import alive
from tests.chaos.eventlog import duplicates, events, postmortem_headline

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)  # a cluster, an experiment, a Spark job: minutes on a busy 2-core machine
@pytest.mark.parametrize(
    "cluster_file",
    [
        "two-regions.yaml",
        # tokens and TLS everywhere; the demo's workload, probes and actions authenticate
        # with the token the supervisor made, and the regions replicate over pulsar+ssl://
        "two-regions-secured.yaml",
    ],
)
def test_demo_runs_on_two_regions_and_writes_the_postmortem(tmp_path: Path, cluster_file: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "magnetar", "chaos", "demo",
         "--experiment", "replicated-subscription-failover",
         "--cluster-file", str(ROOT / "examples" / cluster_file)],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "no acknowledged message lost" in output, output[-4000:]
    assert "losses" in output  # a row of the headline table
    (run_dir,) = (tmp_path / "runs").glob("demo-*-replicated-subscription-failover")
    headline = postmortem_headline(run_dir)
    assert headline["losses"] == 0
    assert headline["events"] > 1000
    assert (run_dir / "report" / "report.html").stat().st_size > 10_000
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["status"] == "completed"
    assert journal["steady_states"]["before"]["steady_state_met"]
    assert journal["steady_states"]["after"]["steady_state_met"]
    assert all(r["status"] == "succeeded" for r in journal["run"])
    # The consumer really moved region, and the post-mortem tells its failover duplicates from
    # same-region redeliveries as the event log does: a few snapshot intervals (100 ms here)
    # of messages at most.
    logged = events(run_dir)
    assert any(e["event"] == "switch_cluster" for e in logged)
    same, cross = duplicates(logged)
    assert (headline["duplicates_same_region"], headline["duplicates_cross_region"]) == (same, cross)
    assert same + cross < sum(1 for e in logged if e["event"] == "receive") // 10
    cluster = tmp_path / "runs" / run_dir.name.removesuffix("-replicated-subscription-failover") / "cluster"
    state = json.loads((cluster / "state.json").read_text())
    assert {p["region"] for p in state["processes"] if p["role"] == "broker"} == {"jp-east", "jp-west"}
    pids = [p["pid"] for p in state["processes"]]
    assert pids
    assert not any(alive(pid) for pid in pids), "the demo stops every process it started"
