"""``magnetar local``: real processes started, recorded, inspected and stopped, none left behind."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from magnetar.bookie.layout import WRITABLE_BOOKIES
from magnetar.common.metadata import open_store
from magnetar.local.supervisor import ClusterState, alive

pytestmark = [pytest.mark.zookeeper]


def local(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "magnetar", "local", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path.cwd())},
    )


def write_spec(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


async def registered_bookies(url: str) -> list[str]:
    store = await open_store(url)
    try:
        return await store.children(WRITABLE_BOOKIES)
    finally:
        await store.close()


def test_up_status_down_leaves_no_process(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "cluster.yaml",
        "name: storage-only\nregions:\n  - name: r1\n    bookies: 3\n    brokers: 0\n",
    )
    cluster_dir = tmp_path / "run" / "cluster"
    started = local("up", "-f", str(spec), "--dir", str(cluster_dir), cwd=tmp_path)
    try:
        assert started.returncode == 0, started.stderr + started.stdout
        state = ClusterState.load(cluster_dir)
        assert [p.role for p in state.processes] == ["zookeeper", "bookie", "bookie", "bookie"]
        assert all(alive(p.pid) for p in state.processes)
        bookie_ids = sorted(p.endpoints["id"] for p in state.find("bookie"))
        assert sorted(asyncio.run(registered_bookies(state.regions["r1"]["metadata_store"]))) == bookie_ids

        shown = local("status", "--dir", str(cluster_dir), cwd=tmp_path)
        assert shown.returncode == 0
        assert shown.stdout.count("running") == 4
    finally:
        stopped = local("down", "--dir", str(cluster_dir), cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped 4 processes" in stopped.stdout
    assert not any(alive(p.pid) for p in ClusterState.load(cluster_dir).processes)
    again = local("down", "--dir", str(cluster_dir), cwd=tmp_path)
    assert "stopped 0 processes" in again.stdout
    assert (cluster_dir / "state.json").exists()
    assert json.loads((cluster_dir / "state.json").read_text())["name"] == "storage-only"


def test_failed_up_stops_what_it_started(tmp_path: Path) -> None:
    # The second region's bookies refuse an unknown setting and exit: up must fail cleanly.
    spec = write_spec(
        tmp_path / "cluster.yaml",
        "name: broken\nregions:\n"
        "  - {name: good, bookies: 1, brokers: 0, "
        "ledger: {ensemble_size: 1, write_quorum: 1, ack_quorum: 1}}\n"
        "  - {name: bad, bookies: 1, brokers: 0, ledger: {ensemble_size: 1, write_quorum: 1, ack_quorum: 1}, "
        "bookie_settings: {no_such_setting: 1}}\n",
    )
    cluster_dir = tmp_path / "cluster"
    result = local("up", "-f", str(spec), "--dir", str(cluster_dir), cwd=tmp_path)
    assert result.returncode != 0
    assert "bad-bookie-0" in result.stderr
    assert "no_such_setting" in result.stderr
    state = ClusterState.load(cluster_dir)
    assert len(state.processes) == 3  # zookeeper, good-bookie-0, bad-bookie-0
    assert not any(alive(p.pid) for p in state.processes)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("name: x\nregions: []\n", "regions"),
        ("name: x\nregions:\n  - {name: r1, bookies: 1}\n", "needs at least that many bookies"),
        ("name: x\nregions:\n  - {name: R_1}\n", "lowercase"),
        ("name: x\nregions:\n  - {name: r1, brokers: 1, bogus: 2}\n", "bogus"),
        ("name: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_cluster_files_are_explained(tmp_path: Path, body: str, message: str) -> None:
    spec = write_spec(tmp_path / "cluster.yaml", body)
    result = local("up", "-f", str(spec), "--dir", str(tmp_path / "c"), cwd=tmp_path)
    assert result.returncode != 0
    assert message in result.stderr
