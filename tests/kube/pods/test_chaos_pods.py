"""Chaos experiments on pods, as a user runs them: `magnetar chaos run
chaos/experiments/<name>.yaml --kube` against a MagnetarCluster the operator runs on a node of
`magnetar kube up`. The activities kill containers through their host PIDs (which the node's
containerd gives), the kubelet restarts them, the workload on this machine reaches the brokers
at their pod IPs, and the post-mortem reads the run as it reads a local one: no acknowledged
message lost, the pods' logs (the killed container's too) gathered in the run directory. The
runs are analysed in the test run's one Spark session; the demo's test keeps the post-mortem that
`magnetar chaos demo` runs itself.

The cluster is the shipped experiments' region (jp-east: two brokers, three bookies), so the
experiments run unchanged. One cluster for the module, in a Kubernetes namespace of its own on the
package's node (conftest.py).
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
from pyspark.sql import SparkSession

from tests.kube.pods.harness import ROOT, Cluster, Node, install_cluster, module_namespace, post_mortem

pytestmark = [pytest.mark.kube, pytest.mark.slow]

REGION = "jp-east"
NAMESPACE = "chaos-lab"


@pytest.fixture(scope="module")
def node(chart: Node) -> Iterator[Node]:
    yield from module_namespace(chart, NAMESPACE)


@pytest.fixture(scope="module")
def cluster(node: Node, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    manifest = yaml.safe_load((ROOT / "examples/k8s/local/cluster.yaml").read_text())
    manifest["metadata"]["name"] = REGION
    manifest["spec"]["bookies"]["replicas"] = 3
    manifest["spec"]["brokers"]["replicas"] = 2
    path = tmp_path_factory.mktemp("manifest") / "jp-east.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return install_cluster(node, path, REGION, tmp_path_factory)


def run(
    cluster: Cluster, experiment: str, workdir: Path, path: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    node = cluster.node
    path = path or ROOT / f"chaos/experiments/{experiment}.yaml"
    command = [
        sys.executable, "-m", "magnetar", "chaos", "run", str(path),
        "--kube", "--kube-cluster", f"{REGION}@{NAMESPACE}", "--kubeconfig", str(node.kubeconfig),
        "--run-id", f"kube-{experiment}", "--no-postmortem",
    ]  # fmt: skip
    env = {**os.environ, "MAGNETAR_CONTAINERD_SOCKET": str(node.state_dir / "containerd/containerd.sock")}
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    return done, workdir / "runs" / f"kube-{experiment}"


def restarts(node: Node, pod: str) -> int:
    statuses = node.json("pod", pod)["status"]["containerStatuses"]
    return sum(int(s["restartCount"]) for s in statuses)


@pytest.mark.parametrize(("experiment", "role"), [("broker-kill", "broker"), ("bookie-loss", "bookie")])
def test_an_experiment_on_pods_loses_nothing_and_the_kubelet_restarts_what_it_killed(
    cluster: Cluster, tmp_path: Path, spark: SparkSession, experiment: str, role: str
) -> None:
    node = cluster.node
    before = {p: restarts(node, p) for p in cluster.pods(role)}
    done, run_dir = run(cluster, experiment, tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:] + node.diagnostics()
    summary = post_mortem(run_dir, spark)
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
    assert f"{killed}.previous.log" in gathered, (sorted(gathered), done.stderr[-3000:])
    assert {f"{p}.log" for p in before} <= gathered, sorted(gathered)


def test_a_bookie_container_killed_through_the_cri_restarts_in_its_pod_and_nothing_is_lost(
    cluster: Cluster, tmp_path: Path, spark: SparkSession
) -> None:
    """bookie-loss with the kill and restart replaced by magnetar.chaos.pods.actions.kill_container:
    the node's CRI kills the container (SIGKILL, as ``crictl stop --timeout 0``), the kubelet
    starts a new one in the same pod, and nothing acknowledged is lost."""
    node = cluster.node
    experiment = yaml.safe_load((ROOT / "chaos/experiments/bookie-loss.yaml").read_text())
    start, _kill, _replicate, _start, stop, drained = experiment["method"]
    victim = f"{REGION}-bookie-2"
    kill = {
        "type": "action", "name": "kill-bookie-container", "pauses": {"after": 5},
        "provider": {"type": "python", "module": "magnetar.chaos.pods.actions", "func": "kill_container",
                     "arguments": {"role": "bookie", "name": victim}},
    }  # fmt: skip
    experiment["method"] = [start, kill, stop, drained]
    path = tmp_path / "bookie-container-kill.yaml"
    path.write_text(yaml.safe_dump(experiment))
    pod_before = node.json("pod", victim)
    container_before = pod_before["status"]["containerStatuses"][0]["containerID"].rpartition("//")[2]
    restarts_before = restarts(node, victim)
    done, run_dir = run(cluster, "bookie-container-kill", tmp_path, path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:] + node.diagnostics()
    journal = json.loads((run_dir / "journal.json").read_text())
    killed = next(r for r in journal["run"] if r["activity"]["name"] == "kill-bookie-container")
    assert killed["status"] == "succeeded", killed
    assert killed["output"]["killed_container"] == container_before
    pod_after = node.json("pod", victim)
    assert pod_after["metadata"]["uid"] == pod_before["metadata"]["uid"], "the same pod, not a new one"
    assert pod_after["status"]["containerStatuses"][0]["containerID"].rpartition("//")[2] != container_before
    assert restarts(node, victim) == restarts_before + 1, "the kubelet started the killed container again"
    last = pod_after["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert last["exitCode"] == 137, last  # SIGKILL: no grace period
    summary = post_mortem(run_dir, spark)
    assert summary["headline"]["losses"] == 0, summary["headline"]
    assert summary["headline"]["events"] > 1000, "the workload wrote too little to tell"


def test_broker_rolling_restart_on_pods_is_the_operators_roll_and_nothing_is_lost(
    cluster: Cluster, tmp_path: Path, spark: SparkSession
) -> None:
    """The shipped broker-rolling-restart with --kube: a new ``restartedAt`` in the
    MagnetarCluster, and the operator restarts every broker pod (read-only ones too), each after
    its bundles were transferred away, and no bookie; nothing acknowledged is lost."""
    node = cluster.node
    brokers = cluster.pods("broker") + cluster.pods("broker-readonly")
    uids = {p: node.json("pod", p)["metadata"]["uid"] for p in brokers + cluster.pods("bookie")}
    done, run_dir = run(cluster, "broker-rolling-restart", tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:] + node.diagnostics()
    journal = json.loads((run_dir / "journal.json").read_text())
    rolled = next(r for r in journal["run"] if r["activity"]["name"] == "roll-brokers")
    assert rolled["status"] == "succeeded", rolled
    assert sorted(rolled["output"]["restarted"]) == sorted(brokers), rolled["output"]
    after = {p: node.json("pod", p)["metadata"]["uid"] for p in uids}
    assert all(after[p] != uids[p] for p in brokers), "every broker pod is a new one"
    assert all(after[p] == uids[p] for p in uids if p not in brokers), "no bookie restarted"
    spec = node.json("mgc", REGION)["spec"]["brokers"]
    assert spec["restartedAt"] == rolled["output"]["restarted_at"]
    summary = post_mortem(run_dir, spark)
    assert summary["headline"]["losses"] == 0, summary["headline"]
    assert summary["headline"]["events"] > 1000, "the workload wrote too little to tell"


def test_the_operator_rolls_bookies_then_brokers_under_500_msgs_and_nothing_is_lost(
    cluster: Cluster, tmp_path: Path, spark: SparkSession
) -> None:
    """The operator's rollout promise under the chaos lab's workload (official client, event log,
    500 msg/s): a new restartedAt for the bookies, then for the brokers; the operator restarts
    each bookie pod once nothing is under-replicated and each broker pod after its bundles moved,
    and the post-mortem finds nothing acknowledged lost."""
    node = cluster.node
    experiment = yaml.safe_load((ROOT / "chaos/experiments/broker-rolling-restart.yaml").read_text())
    start, roll_brokers, stop = experiment["method"]
    start["provider"]["arguments"]["rate"] = 500
    roll_bookies = {**roll_brokers, "name": "roll-bookies",
                    "provider": {**roll_brokers["provider"], "arguments": {"role": "bookie"}}}  # fmt: skip
    experiment["method"] = [start, roll_bookies, roll_brokers, stop]
    path = tmp_path / "rollout.yaml"
    path.write_text(yaml.safe_dump(experiment))
    pods = cluster.pods("bookie") + cluster.pods("broker") + cluster.pods("broker-readonly")
    uids = {p: node.json("pod", p)["metadata"]["uid"] for p in pods}
    done, run_dir = run(cluster, "rollout", tmp_path, path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:] + node.diagnostics()
    journal = json.loads((run_dir / "journal.json").read_text())
    outputs = {r["activity"]["name"]: r["output"] for r in journal["run"] if r["status"] == "succeeded"}
    assert outputs["roll-bookies"]["restarted"] == cluster.pods("bookie")[::-1], outputs["roll-bookies"]
    assert sorted(outputs["roll-brokers"]["restarted"]) == sorted(p for p in pods if "-broker-" in p)
    assert all(node.json("pod", p)["metadata"]["uid"] != uids[p] for p in pods), "every pod is a new one"
    summary = post_mortem(run_dir, spark)
    assert summary["headline"]["losses"] == 0, summary["headline"]
    assert summary["headline"]["events"] > 20_000, "the workload wrote too little to tell"


def test_the_demo_moves_a_bundle_on_pods_and_loses_nothing(cluster: Cluster, tmp_path: Path) -> None:
    # `magnetar chaos demo --kube`: the transfer's admin call goes from this machine through the
    # broker Service, redirected to the owner by its pod-ip listener, and the clients follow the
    # bundle to the next owner's pod IP; the post-mortem finds nothing acknowledged lost.
    node = cluster.node
    command = [
        sys.executable, "-m", "magnetar", "chaos", "demo", "--kube",
        "--kube-cluster", f"{REGION}@{NAMESPACE}",
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


def test_a_deleted_broker_pod_is_made_again_and_nothing_acknowledged_is_lost(
    cluster: Cluster, tmp_path: Path, spark: SparkSession
) -> None:
    """broker-kill with the kill replaced by magnetar.chaos.pods.actions.delete_pod: the pod
    goes through its grace period (its bundles handed over), the StatefulSet makes a new pod of
    the same name, the clients follow the bundles, and nothing acknowledged is lost."""
    node = cluster.node
    experiment = yaml.safe_load((ROOT / "chaos/experiments/broker-kill.yaml").read_text())
    start, _kill, _start, stop = experiment["method"]
    delete = {
        "type": "action", "name": "delete-broker-pod", "pauses": {"after": 5},
        "provider": {"type": "python", "module": "magnetar.chaos.pods.actions", "func": "delete_pod",
                     "arguments": {"name": f"{REGION}-broker-1"}},
    }  # fmt: skip
    experiment["method"] = [start, delete, stop]
    path = tmp_path / "broker-pod-delete.yaml"
    path.write_text(yaml.safe_dump(experiment))
    uid_before = node.json("pod", f"{REGION}-broker-1")["metadata"]["uid"]
    done, run_dir = run(cluster, "broker-pod-delete", tmp_path, path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:] + node.diagnostics()
    journal = json.loads((run_dir / "journal.json").read_text())
    deleted = next(r for r in journal["run"] if r["activity"]["name"] == "delete-broker-pod")
    assert deleted["status"] == "succeeded", deleted
    assert deleted["output"]["deleted_uid"] == uid_before
    assert node.json("pod", f"{REGION}-broker-1")["metadata"]["uid"] != uid_before, "a new pod"
    summary = post_mortem(run_dir, spark)
    assert summary["headline"]["losses"] == 0, summary["headline"]
    assert summary["headline"]["events"] > 1000, "the workload wrote too little to tell"
