"""``magnetar chaos run``: an experiment file run by Chaos Toolkit against a local cluster, with
the journal, the cluster's logs and a summary gathered in runs/<run id>/."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from magnetar.local.spec import ClusterSpec, RegionSpec
from magnetar.local.supervisor import Supervisor

pytestmark = [pytest.mark.zookeeper]

EXPERIMENTS = Path(__file__).parent / "experiments"


def chaos(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "magnetar", "chaos", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "cluster"
    supervisor = Supervisor(directory)
    supervisor.up(ClusterSpec(name="c", regions=[RegionSpec(name="r1", bookies=2, brokers=0)]))
    yield directory
    supervisor.down()


def test_run_gathers_journal_logs_and_summary(cluster: Path, tmp_path: Path) -> None:
    result = chaos(
        "run", str(EXPERIMENTS / "bookie-restart.yaml"), "--cluster-dir", str(cluster), "--run-id", "r-1",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = tmp_path / "runs" / "r-1"
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["status"] == "completed"
    assert journal["steady_states"]["before"]["steady_state_met"]
    assert journal["steady_states"]["after"]["steady_state_met"]
    kill, down, start = journal["run"]
    assert down["output"] == [kill["output"]["name"]], "the probe saw the killed bookie down"
    assert start["output"]["name"] == kill["output"]["name"]
    assert (run_dir / "cluster" / "state.json").exists()
    assert (run_dir / "cluster" / f"{kill['output']['name']}.log").exists()
    assert (run_dir / "events").is_dir()
    # every run writes run.json; this experiment starts no workload, so it lists nothing
    assert json.loads((run_dir / "run.json").read_text()) == {
        "id": "r-1",
        "clusters": [],
        "subscriptions": [],
    }
    assert "kill-bookie" in result.stdout


def test_a_run_id_already_used_is_refused(tmp_path: Path) -> None:
    (tmp_path / "runs" / "r-1" / "events").mkdir(parents=True)
    result = chaos("run", str(EXPERIMENTS / "bookie-restart.yaml"), "--run-id", "r-1", cwd=tmp_path)
    assert result.returncode != 0
    assert "run directory runs/r-1 exists already" in result.stderr
    assert "Traceback" not in result.stderr


def test_invalid_experiments_are_explained(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("title: no method\nsteady-state-hypothesis: {title: x}\n")
    result = chaos("validate", str(bad), cwd=tmp_path)
    assert result.returncode != 0
    assert "not a valid experiment" in result.stderr
    missing = chaos("run", str(tmp_path / "nope.yaml"), cwd=tmp_path)
    assert missing.returncode != 0
    assert "does not exist" in missing.stderr
