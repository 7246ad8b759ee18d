"""Two regions on pods, each in a Kubernetes namespace of its own: a second
MagnetarCluster that shares the first's configuration store, token signing key and CA (of the
first's namespace), so each region's brokers accept the other's replicators. The
official client produces in jp-east and consumes what jp-west replicated; `magnetar chaos demo
--kube` runs the local demo's experiments on the pods unchanged (among them region-outage:
jp-west's containers are frozen and thawed, its consumer fails over to jp-east); partition-regions
cuts the link between the regions' pods on the node and heals it. Nothing acknowledged is lost.

One pair of clusters for the module (the experiments' regions, jp-east and jp-west: one broker,
two bookies and a ZooKeeper each), on the package's node (conftest.py); the two namespaces, which
the example makes, are deleted at the module's end. jp-east's ZooKeeper holds the shared
configuration store; the experiment freezes jp-west.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest
import yaml
from pyspark.sql import SparkSession

from magnetar.chaos.cli import DEMO_EXPERIMENTS
from tests.chaos.eventlog import events
from tests.kube.pods.harness import (
    ROOT,
    Cluster,
    Node,
    cluster_ready,
    condition,
    deleting_namespaces,
    install_cluster,
    post_mortem,
    wait_for,
)

pytestmark = [pytest.mark.kube, pytest.mark.slow]

EAST, WEST = "jp-east", "jp-west"
EXAMPLE = ROOT / "examples/k8s/local/geo.yaml"


@pytest.fixture(scope="module")
def node(chart: Node) -> Iterator[Node]:
    # kubectl without a namespace of the module's: the example names each resource's own
    with deleting_namespaces(chart, EAST, WEST):
        yield chart


@pytest.fixture(scope="module")
def regions(node: Node, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Cluster]:
    """The example as a user applies it: the two Kubernetes namespaces and jp-east, then, once
    jp-east's key and CA exist (jp-west names them in jp-east's namespace), jp-west and the
    namespace replicated to both; the two regions come up side by side."""
    docs = list(yaml.safe_load_all(EXAMPLE.read_text()))
    first = [d for d in docs if d["kind"] == "Namespace" or d["metadata"]["name"] == EAST]
    path = tmp_path_factory.mktemp("manifest") / "jp-east.yaml"
    path.write_text(yaml.safe_dump_all(first))

    def then_west() -> None:
        shared = [f"secret/{EAST}-token-key", f"secret/{EAST}-ca"]
        wait_for(f"{EAST}'s key and CA", lambda: node.kubectl("get", "-n", EAST, *shared).returncode == 0,
                 node, 120)  # fmt: skip
        rest = yaml.safe_dump_all([d for d in docs if d not in first])
        applied = node.kubectl("apply", "-f", "-", stdin=rest)
        assert applied.returncode == 0, applied.stderr

    east = install_cluster(node, path, EAST, tmp_path_factory, namespace=EAST, meanwhile=then_west)
    wait_for(f"{WEST} Ready", lambda: cluster_ready(node, WEST, WEST), node, 300)
    west_ip = node.json("service", f"{WEST}-broker", "-n", WEST)["spec"]["clusterIP"]
    # One token and one CA serve both regions: that is the point of sharing them.
    west = Cluster(node, WEST, west_ip, east.token_file, east.ca_file, east.token, namespace=WEST)
    return {EAST: east, WEST: west}


def test_what_jp_east_stores_reaches_a_consumer_in_jp_west_in_order(regions: dict[str, Cluster]) -> None:
    east, west = regions[EAST], regions[WEST]
    node = east.node

    def ready() -> bool:
        out = node.kubectl("get", "mgns", "geo-orders", "-n", EAST, "-o", "json")
        return out.returncode == 0 and condition(json.loads(out.stdout), "Ready").get("status") == "True"

    wait_for("the replicated MagnetarNamespace Ready", ready, node, 120)
    topic = "persistent://geo/orders/replicated"
    in_west, in_east = west.client(), east.client()
    try:
        consumer = in_west.subscribe(topic, "west", initial_position=pulsar.InitialPosition.Earliest)
        producer = in_east.create_producer(topic, batching_enabled=False)
        sent = [f"m-{i}".encode() for i in range(100)]
        for payload in sent:
            producer.send(payload)
        received: list[bytes] = []
        deadline = time.monotonic() + 120
        while len(received) < len(sent) and time.monotonic() < deadline:
            try:
                message = consumer.receive(5000)
            except pulsar.Timeout:
                continue
            received.append(message.data())
            consumer.acknowledge(message)
        assert received == sent, (
            f"{len(received)} of {len(sent)} replicated, or out of order\n{node.diagnostics()}"
        )
    finally:
        in_west.close()
        in_east.close()


def chaos(node: Node, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``magnetar chaos ARGS --kube`` on both regions, as a user runs it on this machine."""
    command = [
        sys.executable, "-m", "magnetar", "chaos", *args,
        "--kube", "--kube-cluster", f"{EAST}@{EAST}", "--kube-cluster", f"{WEST}@{WEST}",
        "--kubeconfig", str(node.kubeconfig),
    ]  # fmt: skip
    env = {**os.environ, "MAGNETAR_CONTAINERD_SOCKET": str(node.state_dir / "containerd/containerd.sock")}
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:] + node.diagnostics()
    return done


def run_checked(run_dir: Path, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's journal, once every activity succeeded and the post-mortem (its ``summary``, else
    the report's) found no loss."""
    if summary is None:
        summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["headline"]["losses"] == 0, (run_dir.name, summary["headline"])
    assert summary["headline"]["events"] > 1000, f"{run_dir.name}: the workload wrote too little to tell"
    journal: dict[str, Any] = json.loads((run_dir / "journal.json").read_text())
    assert all(r["status"] == "succeeded" for r in journal["run"]), journal["run"]
    return journal


@pytest.mark.timeout(600)  # four experiments on six pods and their post-mortem: over 300 s on a busy machine
def test_the_demo_on_two_regions_runs_the_local_demos_experiments_and_loses_nothing(
    regions: dict[str, Cluster], tmp_path: Path
) -> None:
    """`magnetar chaos demo --kube` on both regions runs what `make demo` runs locally, unchanged:
    a bundle unloaded and one transferred in jp-east, a consumer failing over to jp-west on a
    replicated subscription, and jp-west's containers frozen (its consumer moved to jp-east) and
    thawed. Every run's post-mortem finds nothing acknowledged lost."""
    done = chaos(regions[EAST].node, tmp_path, "demo")
    for experiment in DEMO_EXPERIMENTS:
        assert f"{experiment}: completed, hypothesis after: True" in done.stdout, done.stdout[-4000:]
        (run_dir,) = (tmp_path / "runs").glob(f"demo-*-{experiment}")
        journal = run_checked(run_dir)
        if experiment == "region-outage":
            outage = next(r for r in journal["run"] if r["activity"]["name"] == "region-outage")
            frozen = sorted(outage["output"]["processes"])
            assert frozen == [f"{WEST}-bookie-0", f"{WEST}-bookie-1", f"{WEST}-broker-0"], frozen
    assert done.stdout.count("no acknowledged message lost") == len(DEMO_EXPERIMENTS)


def test_partition_regions_on_pods_holds_replication_and_loses_nothing(
    regions: dict[str, Cluster], tmp_path: Path, spark: SparkSession
) -> None:
    """The shipped experiment, unchanged: each region produces and consumes while the link
    between the regions' pods is cut, then healed."""
    experiment = ROOT / "chaos/experiments/partition-regions.yaml"
    run_id = "kube-partition-regions"
    chaos(regions[EAST].node, tmp_path, "run", str(experiment), "--run-id", run_id, "--no-postmortem")
    run_dir = tmp_path / "runs" / run_id
    journal = run_checked(run_dir, post_mortem(run_dir, spark))
    assert_the_cut_held_replication_and_the_heal_released_it(run_dir, journal)


def assert_the_cut_held_replication_and_the_heal_released_it(run_dir: Path, journal: dict[str, Any]) -> None:
    """While the link was cut, each region's consumer kept receiving its own region's messages
    and none of the other's; after the heal it received the other region's too."""
    outputs = {r["activity"]["name"]: r["output"] for r in journal["run"]}
    assert sorted(outputs["partition-regions"]["links"]) == [f"{EAST}->{WEST}", f"{WEST}->{EAST}"]
    cut_ns, healed_ns = (int(outputs[name]["at"] * 1e9) for name in ("partition-regions", "heal-partition"))
    margin = 2_000_000_000  # what was already on the wire when the rules went in
    received = [e for e in events(run_dir) if e["event"] == "receive"]
    for subscription, own, other in (("orders-e", "e", "w"), ("orders-w", "w", "e")):
        mine = [e for e in received if e["subscription"] == subscription]
        during = {str(e["uid"]).split("-")[0] for e in mine if cut_ns + margin < e["ts"] < healed_ns}
        after = {str(e["uid"]).split("-")[0] for e in mine if e["ts"] > healed_ns}
        assert during == {own}, f"{subscription} during the cut received from {during}"
        assert after == {own, other}, f"{subscription} after the heal received from {after}"
