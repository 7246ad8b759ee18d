"""Chaos experiments on pods (issue 16 item 5), as a user runs them: `magnetar chaos run
chaos/experiments/<name>.yaml --kube` against a MagnetarCluster the operator runs on a node of
`magnetar kube up`. The activities kill containers through their host PIDs (which the node's
containerd gives), the kubelet restarts them, the workload on this machine reaches the brokers
at their pod IPs, and the post-mortem reads the run as it reads a local one: no acknowledged
message lost, the pods' logs (the killed container's too) gathered in the run directory.

The cluster is the shipped experiments' region (jp-east: two brokers, three bookies), so the
experiments run unchanged. One node, chart and cluster for the module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.kube.pods import ROOT, Cluster, Node, install_cluster, start_node

pytestmark = [pytest.mark.kube, pytest.mark.slow]

PORT_BASE = 19440  # the other modules' nodes use other ports; one node at a time all the same
REGION = "jp-east"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    yield from start_node(tmp_path_factory, PORT_BASE)


@pytest.fixture(scope="module")
def cluster(node: Node, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    manifest = yaml.safe_load((ROOT / "examples/k8s/local/cluster.yaml").read_text())
    manifest["metadata"]["name"] = REGION
    manifest["spec"]["bookies"]["replicas"] = 3
    manifest["spec"]["brokers"]["replicas"] = 2
    path = tmp_path_factory.mktemp("manifest") / "jp-east.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return install_cluster(node, path, REGION, tmp_path_factory)


def run(cluster: Cluster, experiment: str, workdir: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    node = cluster.node
    command = [
        sys.executable, "-m", "magnetar", "chaos", "run", str(ROOT / f"chaos/experiments/{experiment}.yaml"),
        "--kube", "--kube-cluster", f"{REGION}@default", "--kubeconfig", str(node.kubeconfig),
        "--run-id", f"kube-{experiment}",
    ]  # fmt: skip
    env = {**os.environ, "MAGNETAR_CONTAINERD_SOCKET": str(node.state_dir / "containerd/containerd.sock")}
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    return done, workdir / "runs" / f"kube-{experiment}"


def restarts(node: Node, pod: str) -> int:
    statuses = node.json("pod", pod)["status"]["containerStatuses"]
    return sum(int(s["restartCount"]) for s in statuses)


@pytest.mark.parametrize(("experiment", "role"), [("broker-kill", "broker"), ("bookie-loss", "bookie")])
def test_an_experiment_on_pods_loses_nothing_and_the_kubelet_restarts_what_it_killed(
    cluster: Cluster, tmp_path: Path, experiment: str, role: str
) -> None:
    node = cluster.node
    before = {p: restarts(node, p) for p in cluster.pods(role)}
    done, run_dir = run(cluster, experiment, tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:] + node.diagnostics()
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["headline"]["losses"] == 0, summary["headline"]
    assert summary["headline"]["events"] > 1000, "the workload wrote too little to tell"  # 200 msg/s, 20 s
    journal = json.loads((run_dir / "journal.json").read_text())
    killed = next(r["output"]["name"] for r in journal["run"] if r["activity"]["name"].startswith("kill-"))
    assert killed in before, (killed, before)
    assert restarts(node, killed) == before[killed] + 1, "the kubelet restarted the killed container once"
    others = [p for p in before if p != killed]
    assert all(restarts(node, p) == before[p] for p in others), "only the chosen pod was hit"
    # The pods' logs are in the run, the killed container's own log among them.
    gathered = {p.name for p in (run_dir / "cluster").iterdir()}
    assert f"{killed}.previous.log" in gathered, sorted(gathered)
    assert {f"{p}.log" for p in before} <= gathered, sorted(gathered)


def test_the_demo_moves_a_bundle_on_pods_and_loses_nothing(cluster: Cluster, tmp_path: Path) -> None:
    # `magnetar chaos demo --kube`: the transfer's admin call goes from this machine through the
    # broker Service, redirected to the owner by its pod-ip listener, and the clients follow the
    # bundle to the next owner's pod IP; the post-mortem finds nothing acknowledged lost.
    node = cluster.node
    command = [
        sys.executable, "-m", "magnetar", "chaos", "demo", "--kube", "--kube-cluster", f"{REGION}@default",
        "--kubeconfig", str(node.kubeconfig), "--experiment", "bundle-transfer",
    ]  # fmt: skip
    env = {**os.environ, "MAGNETAR_CONTAINERD_SOCKET": str(node.state_dir / "containerd/containerd.sock")}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:] + node.diagnostics()
    assert "bundle-transfer: completed, hypothesis after: True" in done.stdout, done.stdout[-4000:]
    assert "no acknowledged message lost" in done.stdout
    (run_dir,) = (tmp_path / "runs").glob("demo-*-bundle-transfer")
    journal = json.loads((run_dir / "journal.json").read_text())
    moved = next(r for r in journal["run"] if "transfer" in r["activity"]["name"])
    assert moved["status"] == "succeeded", moved
