"""`make demo` end to end (the command it runs, with one experiment to keep CI short): a local
cluster comes up, the experiment runs with a real workload, the cluster goes down, and the Spark
post-mortem's report and headline are printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from magnetar.chaos.local.supervisor import alive

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)  # a cluster, an experiment, a Spark job: minutes on a busy 2-core machine
def test_demo_runs_an_experiment_and_writes_the_postmortem(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "magnetar", "chaos", "demo", "--experiment", "bundle-unload",
         "--cluster-file", str(ROOT / "examples" / "one-region.yaml")],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "no acknowledged message lost" in output
    assert "post-mortem" in output
    assert "losses" in output  # a row of the headline table
    (run_dir,) = [d for d in (tmp_path / "runs").glob("demo-*-bundle-unload")]
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["headline"]["losses"] == 0
    assert summary["headline"]["events"] > 1000
    assert (run_dir / "report" / "report.html").stat().st_size > 10_000
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["status"] == "completed"
    assert journal["steady_states"]["before"]["steady_state_met"]
    assert journal["steady_states"]["after"]["steady_state_met"]
    assert all(r["status"] == "succeeded" for r in journal["run"])
    cluster = tmp_path / "runs" / run_dir.name.removesuffix("-bundle-unload") / "cluster"
    state = json.loads((cluster / "state.json").read_text())
    pids = [p["pid"] for p in state["processes"]]
    assert pids
    assert not any(alive(pid) for pid in pids), "the demo stops every process it started"
