"""Every experiment in chaos/experiments/ runs for real against a local cluster with the
workload (examples/one-region.yaml; two small regions for the geo experiments): the hypothesis
holds before and after, the faults really happened, and the event log shows no acknowledged
message lost. The geo runs are also analysed by the Spark post-mortem, which must agree.
(replicated-subscription-failover runs in tests/chaos/test_demo.py, through `make demo`;
metadata-store-outage in tests/chaos/test_metadata_store_outage.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.local.supervisor import Supervisor, alive
from magnetar.spark import postmortem
from tests.chaos.eventlog import duplicates, events
from tests.chaos.lab import ROOT, run

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("lab") / "cluster"
    supervisor = Supervisor(directory)
    supervisor.up(ClusterSpec.load(ROOT / "examples" / "one-region.yaml"))
    yield directory
    supervisor.down()


@pytest.mark.parametrize(
    "experiment",
    [
        "bundle-unload",
        "bundle-transfer",
        "broker-kill",
        "broker-rolling-restart",
        "bookie-loss",
    ],
)
def test_experiment(cluster: Path, experiment: str) -> None:
    completed(experiment, cluster)


def completed(experiment: str, cluster: Path) -> tuple[Path, list[dict[str, Any]]]:
    """Run ``experiment``; it completed with its hypothesis met before and after, and lost nothing."""
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
    if "roll-brokers" in activities:  # every broker of the region, each a new process
        rolled = activities["roll-brokers"]["output"]["restarted"]
        assert len({r["name"] for r in rolled}) == len(rolled) >= 2, rolled
        assert all(not alive(r["stopped_pid"]) and alive(r["pid"]) for r in rolled), rolled
    logged = events(run_dir)
    acked = {e["uid"] for e in logged if e["event"] == "send_ok"}
    received = {e["uid"] for e in logged if e["event"] == "receive"}
    assert len(acked) > 1000
    assert acked <= received
    assert (run_dir / "cluster" / "state.json").exists()
    return run_dir, logged


def test_partitioned_bundle_unload(cluster: Path, spark: SparkSession) -> None:
    """One partition's bundle unloaded: the post-mortem finds no loss and no message out of order
    within a key or a partition (a producer's messages to different partitions may interleave)."""
    run_dir, logged = completed("partitioned-bundle-unload", cluster)
    partitions = {e["msg_id"].split(":")[2] for e in logged if e["event"] == "send_ok"}
    assert len(partitions) == 8, f"the messages went to partitions {sorted(partitions)}"
    headline = postmortem.run(run_dir, spark, html=False).summary["headline"]
    assert headline["losses"] == 0
    assert (headline["reorders_key"], headline["reorders_partition"]) == (0, 0)


#: two small regions for the geo experiments (one bookie and one broker each, one ZooKeeper)
GEO = ClusterSpec(
    name="geo-lab",
    regions=[
        RegionSpec(
            name=name,
            bookies=1,
            brokers=1,
            ledger=LedgerSpec(ensemble_size=1, write_quorum=1, ack_quorum=1),
            broker_settings={
                "metadata_store_session_timeout_millis": 5000,
                "replication_policy_check_interval_seconds": 0.5,
            },
        )
        for name in ("jp-east", "jp-west")
    ],
)


@pytest.fixture(scope="module")
def geo_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("geo-lab") / "cluster"
    supervisor = Supervisor(directory)
    supervisor.up(GEO)
    yield directory
    supervisor.down()


def geo_run(
    experiment: str, cluster: Path, spark: SparkSession
) -> tuple[dict[str, Any], list[dict[str, object]]]:
    """Run a two-region experiment with its post-mortem; its journal and events, once it
    completed with the hypothesis holding, every subscription received every message of both
    regions acknowledged while it still consumed, duplicates stayed bounded, and the
    post-mortem (in the session's Spark) found no loss and counted the duplicates the event log
    holds."""
    result, run_dir = run(experiment, cluster)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["status"] == "completed"
    assert journal["steady_states"]["after"]["steady_state_met"]
    logged = events(run_dir)
    sent = {str(e["uid"]): int(e["ts"]) for e in logged if e["event"] == "send_ok"}
    assert len(sent) > 1000
    by_subscription: dict[str, list[str]] = {}
    ended: dict[str, int] = {}
    for e in logged:
        if e["event"] == "receive":
            subscription = str(e["subscription"])
            by_subscription.setdefault(subscription, []).append(str(e["uid"]))
            ended[subscription] = max(ended.get(subscription, 0), int(e["ts"]))
    for subscription, uids in by_subscription.items():
        # A workload stopped before the other one does not see the other's last messages: what
        # counts is every message acknowledged while the subscription still consumed.
        acked = {uid for uid, ts in sent.items() if ts < ended[subscription] - 2_000_000_000}
        assert acked <= set(uids), f"{subscription}: every acknowledged message received"
        # Cross-region failover duplicates stay within a few snapshot intervals of messages.
        assert len(uids) - len(set(uids)) < len(set(uids)) // 10, f"{subscription}: duplicates bounded"
    headline = postmortem.run(run_dir, spark, html=False).summary["headline"]
    assert headline["losses"] == 0
    assert (headline["duplicates_same_region"], headline["duplicates_cross_region"]) == duplicates(logged)
    return journal, logged


def test_region_outage(geo_cluster: Path, spark: SparkSession) -> None:
    _, logged = geo_run("region-outage", geo_cluster, spark)
    assert any(e["event"] == "switch_cluster" for e in logged), "a consumer really moved region"


def test_partition_regions(geo_cluster: Path, spark: SparkSession) -> None:
    journal, logged = geo_run("partition-regions", geo_cluster, spark)
    activities = {r["activity"]["name"]: r for r in journal["run"]}
    assert activities["partition-regions"]["output"]["links"], "the links were really cut"
    # both regions' messages reached both subscriptions (replication resumed after the cut)
    for subscription in ("orders-e", "orders-w"):
        origins = {
            str(e["uid"]).split("-")[0]
            for e in logged
            if e["event"] == "receive" and e["subscription"] == subscription
        }
        assert len(origins) == 2, f"{subscription} received from {origins}"
