"""`magnetar kube up | down | status` as a user notices it: the node is Ready, pods run with an
address of the pod range, a Service's ClusterIP reaches its pod and CoreDNS resolves its name, and
after `down` no process, bridge, route or iptables chain of the node is left. One node for the
module (about half a minute to start); the last tests take it down and check what is left.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from magnetar.kube import iptables
from magnetar.kube.containerd import shim_pids
from magnetar.kube.control_plane import BIN
from magnetar.kube.dns import resolve_a
from magnetar.kube.host import bridge_exists, missing_binaries
from magnetar.kube.layout import BRIDGE, NODE_IP, POD_CIDR, SERVICE_CIDR, Layout
from magnetar.kube.state import State

pytestmark = pytest.mark.kube

PORT_BASE = 17440  # not the default, so a node a user keeps under the default state is told apart


def magnetar(*args: str, timeout: float = 360) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "magnetar", "kube", *args],
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


@dataclass
class Node:
    state_dir: Path
    kubeconfig: Path
    chains_before: dict[str, list[str]]
    up_seconds: float

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
                              input=stdin, capture_output=True, text=True, timeout=60)  # fmt: skip

    def wait_running(self, pod: str, timeout_s: float = 90) -> dict[str, object]:
        deadline = time.monotonic() + timeout_s
        doc: dict[str, object] = {}
        while time.monotonic() < deadline:
            out = self.kubectl("get", "pod", pod, "-o", "json")
            if out.returncode == 0:
                doc = json.loads(out.stdout)
                if doc["status"].get("phase") == "Running":  # type: ignore[attr-defined]
                    return doc
            time.sleep(1)
        raise AssertionError(
            f"pod {pod} not Running: {doc.get('status')}\n{self.kubectl('describe', 'pod', pod).stdout}"
        )


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    if os.geteuid() != 0:
        pytest.skip("magnetar kube up needs root")
    missing = missing_binaries()
    if missing:
        pytest.skip("; ".join(missing))
    if bridge_exists(BRIDGE):
        pytest.skip(f"a node already runs here (the bridge {BRIDGE} exists)")
    state_dir = tmp_path_factory.mktemp("kube") / "state"
    chains_before = iptables.chains()
    started = time.monotonic()
    out = magnetar("up", "--state-dir", str(state_dir), "--port-base", str(PORT_BASE))
    up_seconds = time.monotonic() - started
    try:
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"export KUBECONFIG={state_dir / 'kubeconfig'}" in out.stdout
        print(f"\nmagnetar kube up took {up_seconds:.1f}s")
        yield Node(state_dir, state_dir / "kubeconfig", chains_before, up_seconds)
    finally:
        down = magnetar("down", "--state-dir", str(state_dir))
        assert down.returncode == 0, down.stdout + down.stderr


def test_node_is_ready_and_status_says_so(node: Node) -> None:
    out = node.kubectl("get", "nodes", "-o", "json")
    [item] = json.loads(out.stdout)["items"]
    ready = {c["type"]: c["status"] for c in item["status"]["conditions"]}["Ready"]
    assert ready == "True"
    status = magnetar("status", "--state-dir", str(node.state_dir))
    assert status.returncode == 0, status.stdout
    for component in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
                      "kube-proxy", "coredns", "containerd"):  # fmt: skip
        assert component in status.stdout
    assert "NOT" not in status.stdout


def test_a_pod_runs_with_an_address_of_the_pod_range(node: Node) -> None:
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: sleeper}
spec:
  containers: [{name: pause, image: "registry.k8s.io/pause:3.10", imagePullPolicy: Never}]
"""
    assert node.kubectl("apply", "-f", "-", stdin=manifest).returncode == 0
    doc = node.wait_running("sleeper")
    pod_ip = ipaddress.ip_address(doc["status"]["podIP"])  # type: ignore[index]
    assert pod_ip in ipaddress.ip_network(POD_CIDR)
    # The controller manager gave it a service-account token, as any pod of a real cluster gets.
    volumes = [v["name"] for v in doc["spec"]["volumes"]]  # type: ignore[index]
    assert any(v.startswith("kube-api-access-") for v in volumes)


def test_an_image_never_imported_is_not_pulled_from_any_registry(node: Node) -> None:
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: puller}
spec:
  containers: [{name: c, image: "busybox:1.36", imagePullPolicy: Always}]
"""
    assert node.kubectl("apply", "-f", "-", stdin=manifest).returncode == 0
    deadline = time.monotonic() + 60
    while True:
        events = node.kubectl("get", "events", "--field-selector", "involvedObject.name=puller", "-o", "json")
        messages = [e["message"] for e in json.loads(events.stdout)["items"] if e["reason"] == "Failed"]
        if messages or time.monotonic() > deadline:
            break
        time.sleep(1)
    # containerd's registry requests go to a closed local port: refused at once, nothing sent out.
    assert any("proxyconnect tcp: dial tcp 127.0.0.1:9: connect: connection refused" in m for m in messages)
    node.kubectl("delete", "pod", "puller", "--wait=false")


def test_a_service_reaches_its_pod_and_coredns_resolves_it(node: Node) -> None:
    socket = str(node.state_dir / "containerd" / "containerd.sock")
    images = subprocess.run(["ctr", "--address", socket, "-n", "k8s.io", "images", "ls", "-q"],
                            capture_output=True, text=True)  # fmt: skip
    if "docker.io/library/magnetar:0.1.0" not in images.stdout.split():
        pytest.skip("no magnetar:0.1.0 image (make image writes ~/.cache/magnetar/images/magnetar-0.1.0.tar)")
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: server, labels: {app: web}}
spec:
  containers:
  - {name: server, image: "magnetar:0.1.0", imagePullPolicy: Never,
     command: [python, -m, http.server, "8080"], ports: [{containerPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
"""
    assert node.kubectl("apply", "-f", "-", stdin=manifest).returncode == 0
    node.wait_running("server")
    cluster_ip = node.kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}").stdout
    assert ipaddress.ip_address(cluster_ip) in ipaddress.ip_network(SERVICE_CIDR)
    deadline = time.monotonic() + 60
    while True:  # kube-proxy writes the Service's rules once its endpoint is ready
        try:
            with urllib.request.urlopen(f"http://{cluster_ip}/", timeout=3) as response:
                assert response.status == 200
                break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    assert resolve_a("web.default.svc.cluster.local", NODE_IP) == [cluster_ip]
    # From inside a pod: its resolv.conf points at CoreDNS, and the Service hairpins back to it.
    probe = ("import socket, urllib.request; print(socket.gethostbyname('web'));"
             "print(urllib.request.urlopen('http://web/', timeout=5).status)")  # fmt: skip
    out = node.kubectl("exec", "server", "--", "python", "-c", probe)
    assert out.stdout.split() == [cluster_ip, "200"], out.stderr


def test_up_again_is_refused_with_what_to_do(node: Node) -> None:
    out = magnetar("up", "--state-dir", str(node.state_dir), "--port-base", str(PORT_BASE))
    assert out.returncode == 1
    assert "a node is up in" in out.stderr
    assert f"magnetar kube down --state-dir {node.state_dir}" in out.stderr
    # Another state directory: the bridge, ports and addresses of the running node are named.
    other = magnetar("up", "--state-dir", str(node.state_dir.parent / "other"), "--port-base", str(PORT_BASE))
    assert other.returncode == 1
    assert f"the bridge {BRIDGE} already exists" in other.stderr
    assert f"127.0.0.1:{PORT_BASE + 1} (etcd-client)" in other.stderr
    assert not (node.state_dir.parent / "other" / "state.json").exists()


def test_up_as_non_root_is_refused(tmp_path: Path) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv to drop root")
    tmp_path.chmod(0o777)
    out = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                          sys.executable, "-m", "magnetar", "kube", "up", "--state-dir", str(tmp_path / "s")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 1
    assert "magnetar kube up needs root" in out.stderr
    assert not (tmp_path / "s").exists()


def test_up_without_the_binaries_names_what_builds_them(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the root check comes first")
    env = {**os.environ, "MAGNETAR_K8S_CACHE": str(tmp_path / "empty-cache")}
    out = subprocess.run([sys.executable, "-m", "magnetar", "kube", "up", "--state-dir", str(tmp_path / "s")],
                         capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert out.returncode == 1
    assert "kubelet" in out.stderr
    assert "run `make kube-node`" in out.stderr
    assert not (tmp_path / "s" / "state.json").exists()


def _still_running(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    """Those of ``pids`` still running after ``timeout_s``. A killed process whose parent died is
    a zombie until the machine's init reaps it, which takes a moment: dead all the same."""
    deadline = time.monotonic() + timeout_s
    while running := [pid for pid in pids if _state(pid) not in (None, "Z")]:
        if time.monotonic() > deadline:
            return running
        time.sleep(0.1)
    return []


def _state(pid: int) -> str | None:
    """The process's state letter (R, S, Z, ...), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _left_behind(node: Node, state: State) -> list[str]:
    left = [f"{name} pid {p.pid}" for name, p in state.procs.items() if p.alive()]
    if bridge_exists(BRIDGE):
        left.append(f"bridge {BRIDGE}")
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    left += [f"route {line}" for line in routes.splitlines() if SERVICE_CIDR in line or POD_CIDR in line]
    for key, names in iptables.new_chains(node.chains_before).items():
        left += [f"{key} {n}" for n in names]
    return left


def test_down_removes_every_process_bridge_route_and_chain(node: Node) -> None:
    state = State.load(node.state_dir / "state.json")
    assert state is not None
    assert all(p.alive() for p in state.procs.values())
    assert iptables.new_chains(node.chains_before)  # kube-proxy's and the kubelet's chains exist now
    out = magnetar("down", "--state-dir", str(node.state_dir))
    assert out.returncode == 0, out.stdout + out.stderr
    assert _left_behind(node, state) == []
    assert not (node.state_dir / "state.json").exists()
    assert (node.state_dir / "logs" / "kubelet.log").exists()  # the logs stay for a post-mortem


def test_a_half_started_node_is_named_and_down_removes_it(node: Node) -> None:
    # Too short a wait: `up` stops half-way with its processes, bridge and chains in place.
    out = magnetar("up", "--state-dir", str(node.state_dir), "--port-base", str(PORT_BASE), "--timeout", "3")
    assert out.returncode == 1
    assert "timed out waiting for" in out.stderr
    assert f"magnetar kube down --state-dir {node.state_dir}" in out.stderr
    again = magnetar("up", "--state-dir", str(node.state_dir), "--port-base", str(PORT_BASE))
    assert again.returncode == 1
    assert "was half-started by an earlier `up`" in again.stderr
    state = State.load(node.state_dir / "state.json")
    assert state is not None
    assert state.phase == "starting"
    out = magnetar("down", "--state-dir", str(node.state_dir))
    assert out.returncode == 0, out.stdout + out.stderr
    assert _left_behind(node, state) == []


def test_down_after_containerd_the_kubelet_and_a_shim_were_killed(node: Node) -> None:
    # As after an OOM kill: the pod's processes outlive their containerd and shim, orphaned.
    out = magnetar("up", "--state-dir", str(node.state_dir), "--port-base", str(PORT_BASE))
    assert out.returncode == 0, out.stdout + out.stderr
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: orphan}
spec:
  containers: [{name: pause, image: "registry.k8s.io/pause:3.10", imagePullPolicy: Never}]
"""
    assert node.kubectl("apply", "-f", "-", stdin=manifest).returncode == 0
    node.wait_running("orphan")
    state = State.load(node.state_dir / "state.json")
    assert state is not None
    layout = Layout(node.state_dir, PORT_BASE)
    shims = shim_pids(layout)
    assert shims
    runc_root = str(node.state_dir / "containerd" / "runc" / "k8s.io")
    listed = subprocess.run(
        ["runc", "--root", runc_root, "list", "-f", "json"], capture_output=True, text=True
    )
    pod_pids = [c["pid"] for c in json.loads(listed.stdout)]
    assert pod_pids
    for pid in (state.procs["containerd"].pid, state.procs["kubelet"].pid, *shims):
        os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    assert all(Path(f"/proc/{pid}").exists() for pid in pod_pids)  # orphaned, still running
    out = magnetar("down", "--state-dir", str(node.state_dir))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "left running without its shim" in out.stdout
    assert _still_running(pod_pids) == []
    assert _left_behind(node, state) == []
