"""Two regions on pods (issue 16): a second MagnetarCluster that shares the first's configuration
store, token signing key and CA, so each region's brokers accept the other's replicators. The
official client produces in jp-east and consumes what jp-west replicated, and the shipped
two-region experiments run on the pods unchanged (region-outage: jp-west's containers are frozen
and thawed, its consumer fails over to jp-east; replicated-subscription-failover), nothing
acknowledged lost.

One node, chart and pair of clusters for the module (the experiments' regions, jp-east and
jp-west: one broker, two bookies and a ZooKeeper each). jp-east's ZooKeeper holds the shared
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

import pulsar
import pytest
import yaml

from tests.kube.pods import (
    ROOT,
    Cluster,
    Node,
    cluster_ready,
    condition,
    install_cluster,
    start_node,
    wait_for,
)

pytestmark = [pytest.mark.kube, pytest.mark.slow]

PORT_BASE = 19640  # the other modules' nodes use other ports; one node at a time all the same
EAST, WEST = "jp-east", "jp-west"
EXAMPLE = ROOT / "examples/k8s/local/geo.yaml"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    yield from start_node(tmp_path_factory, PORT_BASE)


@pytest.fixture(scope="module")
def regions(node: Node, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Cluster]:
    """The example as a user applies it: jp-east, jp-west (naming jp-east's key and CA, which it
    waits for) and the namespace replicated to both."""
    east_doc, *rest = yaml.safe_load_all(EXAMPLE.read_text())
    path = tmp_path_factory.mktemp("manifest") / "jp-east.yaml"
    path.write_text(yaml.safe_dump(east_doc))
    east = install_cluster(node, path, EAST, tmp_path_factory)
    applied = node.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(rest))
    assert applied.returncode == 0, applied.stderr
    wait_for(f"{WEST} Ready", lambda: cluster_ready(node, WEST), node, 300)
    west_ip = node.json("service", f"{WEST}-broker")["spec"]["clusterIP"]
    # One token and one CA serve both regions: that is the point of sharing them.
    west = Cluster(node, WEST, west_ip, east.token_file, east.ca_file, east.token)
    return {EAST: east, WEST: west}


def test_what_jp_east_stores_reaches_a_consumer_in_jp_west_in_order(regions: dict[str, Cluster]) -> None:
    east, west = regions[EAST], regions[WEST]
    node = east.node

    def ready() -> bool:
        out = node.kubectl("get", "mgns", "geo-orders", "-o", "json")
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
        received = []
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


@pytest.mark.parametrize("experiment", ["region-outage", "replicated-subscription-failover"])
def test_a_two_region_experiment_runs_on_pods_and_loses_nothing(
    regions: dict[str, Cluster], tmp_path: Path, experiment: str
) -> None:
    """The shipped experiments, unchanged. region-outage: jp-west's bookie and broker containers
    frozen, its consumer moved to jp-east, jp-west thawed. replicated-subscription-failover: a
    consumer moves from jp-east to jp-west mid-stream. The post-mortem finds no loss."""
    node = regions[EAST].node
    command = [
        sys.executable, "-m", "magnetar", "chaos", "run", str(ROOT / f"chaos/experiments/{experiment}.yaml"),
        "--kube", "--kube-cluster", f"{EAST}@default", "--kube-cluster", f"{WEST}@default",
        "--kubeconfig", str(node.kubeconfig), "--run-id", f"kube-{experiment}",
    ]  # fmt: skip
    env = {**os.environ, "MAGNETAR_CONTAINERD_SOCKET": str(node.state_dir / "containerd/containerd.sock")}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:] + node.diagnostics()
    run_dir = tmp_path / "runs" / f"kube-{experiment}"
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["headline"]["losses"] == 0, summary["headline"]
    assert summary["headline"]["events"] > 1000, "the workload wrote too little to tell"
    journal = json.loads((run_dir / "journal.json").read_text())
    assert all(r["status"] == "succeeded" for r in journal["run"]), journal["run"]
    if experiment == "region-outage":
        outage = next(r for r in journal["run"] if r["activity"]["name"] == "region-outage")
        frozen = sorted(outage["output"]["processes"])
        assert frozen == [f"{WEST}-bookie-0", f"{WEST}-bookie-1", f"{WEST}-broker-0"], frozen
