"""The Chaos Toolkit extension's process faults, on a real local cluster (ZooKeeper and bookie
processes): the faults really happen (pids gone, processes stopped) and are really undone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaoslib.exceptions import ActivityFailed
from chaoslib.experiment import run_experiment

from magnetar.bookie.layout import WRITABLE_BOOKIES
from magnetar.chaos import discover
from magnetar.chaos.process import actions, probes
from magnetar.common.metadata import open_store
from magnetar.local.spec import ClusterSpec, RegionSpec
from magnetar.local.supervisor import ClusterState, Supervisor, alive

pytestmark = [pytest.mark.zookeeper]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    spec = ClusterSpec(
        name="faults",
        regions=[
            RegionSpec(name="east", bookies=2, brokers=0, bookie_settings={"zk_timeout": 2000}),
            RegionSpec(name="west", bookies=2, brokers=0, bookie_settings={"zk_timeout": 2000}),
        ],
    )
    directory = tmp_path / "cluster"
    supervisor = Supervisor(directory)
    supervisor.up(spec)
    yield str(directory)
    supervisor.down()


def registered(url: str) -> list[str]:
    async def read() -> list[str]:
        store = await open_store(url)
        try:
            return await store.children(WRITABLE_BOOKIES)
        finally:
            await store.close()

    return asyncio.run(read())


def test_kill_then_start_a_bookie(cluster: str) -> None:
    killed = actions.kill_bookie(region="east", index=1, cluster_dir=cluster)
    assert killed["name"] == "east-bookie-1"
    assert not alive(killed["pid"])
    assert not probes.cluster_healthy(cluster_dir=cluster)
    assert probes.processes_down(cluster_dir=cluster) == ["east-bookie-1"]

    started = actions.start_bookie(name="east-bookie-1", cluster_dir=cluster)
    assert started["pid"] != killed["pid"]
    assert probes.cluster_healthy(cluster_dir=cluster)
    state = ClusterState.load(Path(cluster))
    record = next(p for p in state.processes if p.name == "east-bookie-1")
    assert record.endpoints["id"] in registered(state.regions["east"]["metadata_store"])


def test_stop_bookie_is_clean(cluster: str) -> None:
    stopped = actions.stop_bookie(region="west", cluster_dir=cluster)
    assert stopped["signal"] == "SIGTERM"
    assert not alive(stopped["pid"])
    log = Path(cluster, f"{stopped['name']}.log").read_text()
    assert "Traceback" not in log


def test_freeze_and_thaw(cluster: str) -> None:
    frozen = actions.freeze_process("west-bookie-0", cluster_dir=cluster)
    assert Path(f"/proc/{frozen['pid']}/status").read_text().count("State:\tT") == 1
    assert not probes.process_running("west-bookie-0", cluster_dir=cluster)
    actions.thaw_process("west-bookie-0", cluster_dir=cluster)
    assert probes.process_running("west-bookie-0", cluster_dir=cluster)


def test_region_outage_and_restore(cluster: str) -> None:
    outage = actions.region_outage("east", mode="kill", cluster_dir=cluster)
    assert sorted(outage["processes"]) == ["east-bookie-0", "east-bookie-1"]
    assert sorted(probes.processes_down(cluster_dir=cluster)) == ["east-bookie-0", "east-bookie-1"]
    assert probes.process_running("west-bookie-0", cluster_dir=cluster)
    actions.restore_region("east", cluster_dir=cluster)
    assert probes.cluster_healthy(cluster_dir=cluster)


def test_bad_targets_fail_with_a_clear_message(cluster: str, tmp_path: Path) -> None:
    with pytest.raises(ActivityFailed, match="no running bookie in nowhere"):
        actions.kill_bookie(region="nowhere", cluster_dir=cluster)
    with pytest.raises(ActivityFailed, match="no local cluster"):
        actions.kill_bookie(cluster_dir=str(tmp_path / "missing"))
    with pytest.raises(ActivityFailed, match="mode must be"):
        actions.region_outage("east", mode="explode", cluster_dir=cluster)


def test_an_experiment_runs_through_chaos_toolkit(cluster: str) -> None:
    healthy = {
        "type": "probe",
        "name": "cluster-healthy",
        "tolerance": True,
        "provider": {"type": "python", "module": "magnetar.chaos.process.probes", "func": "cluster_healthy"},
    }
    experiment = {
        "title": "A bookie crashes and comes back",
        "description": "kill -9 of a bookie, then a restart on its own directories",
        "configuration": {"magnetar_cluster_dir": cluster},
        "steady-state-hypothesis": {"title": "every process runs", "probes": [healthy]},
        "method": [
            {
                "type": "action",
                "name": "kill-bookie",
                "provider": {
                    "type": "python",
                    "module": "magnetar.chaos.process.actions",
                    "func": "kill_bookie",
                    "arguments": {"region": "east"},
                },
            },
            {
                "type": "action",
                "name": "start-bookie",
                "provider": {
                    "type": "python",
                    "module": "magnetar.chaos.process.actions",
                    "func": "start_bookie",
                    "arguments": {"region": "east"},
                },
            },
        ],
        "rollbacks": [],
    }
    journal = run_experiment(experiment)
    assert journal["status"] == "completed", journal
    assert journal["steady_states"]["before"]["steady_state_met"]
    assert journal["steady_states"]["after"]["steady_state_met"]
    kill = journal["run"][0]
    assert kill["status"] == "succeeded"
    assert not alive(kill["output"]["pid"])


def test_discover_lists_the_activities() -> None:
    names = {a["name"] for a in discover()["activities"]}
    assert {"kill_bookie", "start_bookie", "region_outage", "cluster_healthy"} <= names
