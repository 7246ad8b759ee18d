"""Every experiment in chaos/experiments/ runs for real against a local cluster (examples/
one-region.yaml) with the workload: the hypothesis holds before and after, the faults really
happened, and the event log shows no acknowledged message lost."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from magnetar.chaos.local.spec import ClusterSpec
from magnetar.chaos.local.supervisor import Supervisor, alive

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "chaos" / "experiments"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("lab") / "cluster"
    supervisor = Supervisor(directory)
    supervisor.up(ClusterSpec.load(ROOT / "examples" / "one-region.yaml"))
    yield directory
    supervisor.down()


def run(experiment: str, cluster: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    workdir = cluster.parent
    result = subprocess.run(
        [sys.executable, "-m", "magnetar", "chaos", "run", str(EXPERIMENTS / f"{experiment}.yaml"),
         "--cluster-dir", str(cluster), "--run-id", experiment, "--no-postmortem"],
        capture_output=True, text=True, timeout=600, cwd=workdir,
    )  # fmt: skip
    return result, workdir / "runs" / experiment


def events(run_dir: Path) -> list[dict[str, object]]:
    return [
        json.loads(line) for f in (run_dir / "events").glob("*.jsonl") for line in f.read_text().splitlines()
    ]


@pytest.mark.parametrize(
    "experiment", ["bundle-unload", "bundle-transfer", "broker-kill", "broker-rolling-restart", "bookie-loss"]
)
def test_experiment(cluster: Path, experiment: str) -> None:
    result, run_dir = run(experiment, cluster)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["status"] == "completed"
    assert journal["steady_states"]["before"]["steady_state_met"]
    assert journal["steady_states"]["after"]["steady_state_met"]
    activities = {r["activity"]["name"]: r for r in journal["run"]}
    assert all(r["status"] == "succeeded" for r in journal["run"])
    if "backlog-drained" in activities:
        assert activities["backlog-drained"]["output"] is True, "consumers caught up after the fault"
    for name in ("kill-broker", "kill-bookie"):
        if name in activities:
            assert not alive(activities[name]["output"]["pid"]), "the process was really killed"
    logged = events(run_dir)
    acked = {e["uid"] for e in logged if e["event"] == "send_ok"}
    received = {e["uid"] for e in logged if e["event"] == "receive"}
    assert len(acked) > 1000
    assert acked <= received
    assert (run_dir / "cluster" / "state.json").exists()
