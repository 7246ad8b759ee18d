"""What the kube tier's tests of real pods share: one node of `magnetar kube up` for all of them (one
node at a time on the machine), the chart installed on it once, and for each module a Kubernetes
namespace of its own where its MagnetarCluster is applied and Ready, deleted at the module's end."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from magnetar.broker.protocol import commands
from magnetar.broker.protocol.frames import encode, parse_frame
from magnetar.chaos.pods import target as pod_target
from magnetar.chaos.workload.actions import start_workload, stop_workload
from magnetar.kube.containerd import import_image
from magnetar.kube.control_plane import BIN
from magnetar.kube.host import bridge_exists, missing_binaries
from magnetar.kube.layout import BRIDGE, IMAGES_DIR, Layout
from magnetar.kube.state import State
from magnetar.spark import postmortem
from tests.chaos.eventlog import events
from tests.parts import node_priority

ROOT = Path(__file__).resolve().parents[3]
IMAGES = ("magnetar-0.1.0.tar", "zookeeper-3.8.tar", "pause-3.10.tar")
#: the brokers' listener at their pod IPs (operator/manifests.py): the pod range is routed to this
#: machine, the pods' DNS names are not resolvable here
LISTENER = "pod-ip"
#: the second image `make image` builds (images/build.sh): the same sources, its processes
#: reporting version 0.1.0+next; saved apart from IMAGES, so only a test of an upgrade imports it
NEXT_IMAGE = "magnetar:0.1.0-next"
NEXT_TARBALL = IMAGES_DIR / "upgrade" / "magnetar-0.1.0-next.tar"


def magnetar(*args: str, timeout: float = 360) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "magnetar", *args],
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


@dataclass(frozen=True)
class Node:
    state_dir: Path
    kubeconfig: Path
    #: the Kubernetes namespace kubectl works in unless told (``-n``, ``-A``); None: kubectl's own
    namespace: str | None = None

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        # A later -n in ``args`` wins over this one, as kubectl reads its flags.
        scope = [f"--namespace={self.namespace}"] if self.namespace else []
        return subprocess.run([str(BIN / "kubectl"), f"--kubeconfig={self.kubeconfig}", *scope, *args],
                              input=stdin, capture_output=True, text=True, timeout=60)  # fmt: skip

    def json(self, *args: str) -> Any:
        out = self.kubectl("get", *args, "-o", "json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def import_image(self, tarball: Path) -> None:
        """An image tarball into the node's containerd, as `magnetar kube up` imports those of
        ``make image``: the kubelet then finds it, nothing is pulled."""
        import_image(Layout(self.state_dir), tarball)

    def secret(self, name: str, key: str, namespace: str) -> bytes:
        return base64.b64decode(self.json("secret", name, "-n", namespace)["data"][key])

    def within(self, namespace: str) -> Node:
        return dataclasses.replace(self, namespace=namespace)

    def diagnostics(self) -> str:
        parts = [self.kubectl("get", "pods,pvc,mgc,mgns", "-A", "-o", "wide").stdout,
                 self.kubectl("describe", "mgc", "-A").stdout,
                 self.kubectl("logs", "-n", "magnetar", "deploy/magnetar", "--tail=40").stdout]  # fmt: skip
        # What went wrong in the servers: gone with the node once the test ends.
        for component in ("broker", "bookie"):
            logs = self.kubectl("logs", "-A", "-l", f"app.kubernetes.io/component={component}",
                                "--prefix", "--tail=400", "--max-log-requests=10").stdout  # fmt: skip
            trouble = [line for line in logs.splitlines() if " WARNING " in line or " ERROR " in line]
            parts.append(f"{component} warnings and errors (last 30):\n" + "\n".join(trouble[-30:]))
        parts.append(f"every pod's whole log: {self.keep_pod_logs()}")
        return "\n".join(parts)

    def keep_pod_logs(self) -> Path:
        """Every pod's log (and its previous container's), kept beside the node's own logs: what
        a failure report has room for is the tail."""
        kept = self.state_dir / "logs" / "pods" / time.strftime("%H%M%S")
        kept.mkdir(parents=True, exist_ok=True)
        for pod in self.json("pods", "-A")["items"]:
            namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            for suffix, flags in ((".log", ()), (".previous.log", ("--previous",))):
                out = self.kubectl("logs", "-n", namespace, name, "--all-containers", *flags)
                if out.returncode == 0 and out.stdout:
                    (kept / f"{namespace}.{name}{suffix}").write_text(out.stdout)
        return kept


@dataclass
class Cluster:
    node: Node
    name: str
    broker_ip: str
    token_file: Path
    ca_file: Path
    token: str
    namespace: str = "default"

    def client(self) -> Any:
        """The official client on this machine: TLS to the broker Service's ClusterIP (trusting the
        cluster's CA), the super-user's token, lookups on the pod-IP listener."""
        import pulsar

        return pulsar.Client(
            f"pulsar+ssl://{self.broker_ip}:6651",
            authentication=pulsar.AuthenticationToken(self.token),
            tls_trust_certs_file_path=str(self.ca_file),
            listener_name=LISTENER,
            operation_timeout_seconds=30,
        )

    def pods(self, component: str) -> list[str]:
        selector = f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component={component}"
        found = self.node.json("pods", "-n", self.namespace, "-l", selector)["items"]
        return sorted(p["metadata"]["name"] for p in found)


def server_version(ip: str, token: str, port: int = 6650) -> str:
    """What the broker process at ``ip`` says it is: the ``server_version`` of its CONNECTED, the
    Pulsar protocol's handshake (the token's authentication, the plain port)."""
    connect = commands.command(
        commands.T.CONNECT,
        "connect",
        client_version="magnetar-tests",
        protocol_version=21,
        auth_method_name="token",
        auth_data=token.encode(),
    )
    with socket.create_connection((ip, port), timeout=10) as sock:
        sock.sendall(encode(connect))
        reader = sock.makefile("rb")
        (size,) = struct.unpack(">I", reader.read(4))
        reply = parse_frame(reader.read(size)).command
    assert reply.type == commands.T.CONNECTED, f"{ip}: {reply}"
    return str(reply.connected.server_version)


def wait_for(
    what: str, check: Callable[[], bool], node: Node, timeout_s: float, interval_s: float = 1.0
) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if check():
            return time.monotonic() - started
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}\n{node.diagnostics()}")


def condition(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (doc.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


#: the chart's CRDs (charts/magnetar/crds/), kopf's peering ones aside
CRDS = ("magnetarclusters", "magnetarnamespaces", "magnetarbundles")


def crds_established(node: Node) -> bool:
    names = [f"crd/{crd}.magnetar.dev" for crd in CRDS]
    out = node.kubectl("wait", "--for=condition=Established", "--timeout=0s", *names)
    return out.returncode == 0


def cluster_ready(node: Node, name: str, namespace: str = "default") -> bool:
    out = node.kubectl("get", "mgc", name, "-n", namespace, "-o", "json")
    return out.returncode == 0 and condition(json.loads(out.stdout), "Ready").get("status") == "True"


def skip_reasons() -> list[str]:
    if os.geteuid() != 0:
        return ["magnetar kube up needs root"]
    reasons = missing_binaries()
    missing = [name for name in IMAGES if not (IMAGES_DIR / name).exists()]
    if missing:
        reasons.append(f"no image tarball {', '.join(missing)} in {IMAGES_DIR}: run `make image`")
    if bridge_exists(BRIDGE):
        reasons.append(f"a node already runs here (the bridge {BRIDGE} exists)")
    return reasons


#: the node's local volumes: every module's claims (about 45 in all), a released one not reused
VOLUMES = 64


def start_node(tmp_path_factory: pytest.TempPathFactory, port_base: int) -> Iterator[Node]:
    """A fixture's body: a node up for the tests that use it, down at their end (a failure included)."""
    reasons = skip_reasons()
    if reasons:
        pytest.skip("; ".join(reasons))
    state_dir = tmp_path_factory.mktemp("kube") / "state"
    out = magnetar("kube", "up", "--state-dir", str(state_dir), "--port-base", str(port_base),
                   "--volumes", str(VOLUMES))  # fmt: skip
    try:
        assert out.returncode == 0, out.stdout + out.stderr
        state = State.load(Layout(state_dir).state_file)
        assert state is not None, f"no state recorded in {state_dir}"
        with node_priority(proc.pid for proc in state.procs.values()):
            yield Node(state_dir, state_dir / "kubeconfig")
    finally:
        down = magnetar("kube", "down", "--state-dir", str(state_dir))
        assert down.returncode == 0, down.stdout + down.stderr


def install_chart(node: Node) -> float:
    """`helm install` of the chart, as the walkthrough does it, until its operator serves; the
    seconds it took."""
    started = time.monotonic()
    helm = subprocess.run(
        [str(BIN / "helm"), f"--kubeconfig={node.kubeconfig}", "install", "magnetar",
         str(ROOT / "charts/magnetar"), "--namespace", "magnetar", "--create-namespace",
         "--wait", "--timeout", "120s"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert helm.returncode == 0, helm.stdout + helm.stderr + node.diagnostics()
    wait_for("the chart's CRDs", lambda: crds_established(node), node, 60, interval_s=0.5)
    return time.monotonic() - started


def module_namespace(node: Node, namespace: str) -> Iterator[Node]:
    """A module fixture's body: a Kubernetes namespace of the module's own, and the node working in
    it; deleted with all in it at the module's end."""
    made = node.kubectl("create", "namespace", namespace)
    assert made.returncode == 0, made.stderr
    with deleting_namespaces(node, namespace):
        yield node.within(namespace)


@contextlib.contextmanager
def deleting_namespaces(node: Node, *namespaces: str) -> Iterator[None]:
    """Deletes ``namespaces`` when the block ends, and waits until they are gone: the next module
    starts with nothing of this one's running. Their MagnetarNamespaces go first, while the brokers
    that the operator's delete handler asks still run."""
    try:
        yield
    finally:
        for namespace in namespaces:
            gone = node.kubectl("delete", "mgns", "--all", "-n", namespace, "--timeout=120s")
            assert gone.returncode == 0, gone.stderr + node.diagnostics()
        started = time.monotonic()
        deleted = node.kubectl("delete", "namespace", *namespaces, "--wait=false")
        assert deleted.returncode == 0, deleted.stderr
        # A terminating namespace takes no new pods, so none is made again. Its pods get 1 s to
        # stop: graceful shutdowns are tested elsewhere, and with the whole cluster stopping at
        # once a namespace took 54 s to go, nearly the pods' 60 s grace period.
        for namespace in namespaces:
            node.kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=1", "--wait=false")
        names = [f"namespace/{n}" for n in namespaces]
        wait_for(f"{', '.join(names)} deleted",
                 lambda: node.kubectl("get", *names, "--ignore-not-found", "-o", "name").stdout.strip() == "",
                 node, 300)  # fmt: skip
        print(f"\n{', '.join(names)} deleted in {time.monotonic() - started:.0f}s")


def install_cluster(
    node: Node,
    manifest: Path,
    name: str,
    tmp_path_factory: pytest.TempPathFactory,
    namespace: str | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Cluster:
    """``manifest`` (the MagnetarCluster ``name`` of ``namespace``, the node's by default, and what
    it needs) applied on a node with the chart installed, until the cluster is Ready; its super-user
    token and CA in files. ``meanwhile`` runs once the manifest is applied, before the wait for Ready."""
    namespace = namespace or node.namespace or "default"
    applied = node.kubectl("apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr
    applied_at = time.monotonic()
    if meanwhile is not None:
        meanwhile()
    wait_for("the MagnetarCluster Ready", lambda: cluster_ready(node, name, namespace), node, 300)
    seconds = {"cluster Ready": time.monotonic() - applied_at}
    secrets = tmp_path_factory.mktemp("secrets")
    token = node.secret(f"{name}-superuser-token", "token", namespace).decode().strip()
    token_file, ca_file = secrets / "token", secrets / "ca.crt"
    token_file.write_text(token)
    ca_file.write_bytes(node.secret(f"{name}-broker-tls", "ca.crt", namespace))
    broker_ip = node.json("service", f"{name}-broker", "-n", namespace)["spec"]["clusterIP"]
    print(f"\ntimings: {', '.join(f'{k} {v:.0f}s' for k, v in seconds.items())}")
    return Cluster(node, name, broker_ip, token_file, ca_file, token, namespace)


@contextlib.contextmanager
def lab_workload(cluster: Cluster, workdir: Path, topic: str, rate: float = 500) -> Iterator[Path]:
    """The chaos lab's workload (``magnetar workload``: the official client in a process of its
    own, a Shared subscription, the event log of architecture §6) on ``topic`` at ``rate`` msg/s while
    the block runs; stopped and drained when it ends. Yields the run directory of its log."""
    node = cluster.node
    target = pod_target.write(
        workdir / "target",
        node.kubeconfig,
        node.state_dir / "containerd/containerd.sock",
        [pod_target.ClusterRef(cluster.name, cluster.namespace)],
    )
    run_dir = workdir / "run"
    configuration = {
        "magnetar_run_dir": str(run_dir),
        "magnetar_target": "kube",
        "magnetar_cluster_dir": str(target),
        "magnetar_cluster_name": cluster.name,
    }
    start_workload(topic=topic, rate=rate, configuration=configuration)
    try:
        yield run_dir
    finally:
        stop_workload(configuration=configuration)


def post_mortem(run_dir: Path, spark: SparkSession) -> dict[str, Any]:
    """The summary of the run's post-mortem, analysed in the test run's Spark session (rather than
    a JVM of its own for each `magnetar chaos run`)."""
    return postmortem.run(run_dir, spark, html=False).summary


def assert_nothing_lost(run_dir: Path, node: Node, at_least: int = 1000) -> None:
    """Every send the lab's workload had acknowledged was received (and enough were to tell)."""
    logged = events(run_dir)
    acked = {e["uid"] for e in logged if e["event"] == "send_ok"}
    received = {e.get("uid") for e in logged if e["event"] == "receive"}  # foreign messages: no uid
    lost = sorted(acked - received)
    assert len(acked) >= at_least, f"the workload had {len(acked)} sends acknowledged: too few to tell"
    missing = f"{len(lost)} of {len(acked)} acknowledged never received: {lost[:3]} .."
    assert lost == [], f"{missing}\n{node.diagnostics()}"
