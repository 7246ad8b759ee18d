"""The chart and the operator on real pods, as a user notices them: on a node of
`magnetar kube up`, `helm install` of charts/magnetar runs the operator, and the walkthrough's
example cluster (examples/k8s/cluster.yaml, secured by default: tokens and TLS) becomes ZooKeeper,
bookie and broker pods that pass their readiness probes, with the MagnetarCluster Ready; the official
pulsar-client on this machine produces and consumes through the broker Service, `magnetar admin`
works through it, and a MagnetarNamespace becomes a namespace of the admin API.

Its ZooKeeper is the operator's default image, `zookeeper:3.9`: this node pulls nothing, so the name
is given to `make image`'s stand-in in the official image's layout (magnetar/zookeeper-official:3.8:
root by default, /conf of uid 1000, the official entrypoint's behaviour), and the pod runs it as
the operator runs every pod, as uid 10000.

One cluster for the module, in a Kubernetes namespace of its own on the package's node
(conftest.py; the cluster Ready 20 to 25 s after it is applied, ZooKeeper first, on 2 cores); the
namespace is deleted at the module's end, also when a test fails.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from magnetar.kube.containerd import ctr
from magnetar.kube.dns import resolve_a
from magnetar.kube.layout import IMAGES_DIR, NODE_IP, Layout
from tests.kube.pods.harness import (
    ROOT,
    Cluster,
    Node,
    condition,
    install_cluster,
    magnetar,
    module_namespace,
    wait_for,
)

pulsar = pytest.importorskip("pulsar", reason="the official pulsar-client (pip install -e .[workload])")

pytestmark = pytest.mark.kube

CLUSTER = "region-a"
NAMESPACE = "walkthrough"


@pytest.fixture(scope="module")
def node(chart: Node) -> Iterator[Node]:
    yield from module_namespace(chart, NAMESPACE)


#: `make image`'s ZooKeeper in the official image's layout, saved apart from what a node imports
OFFICIAL_ZOOKEEPER = "docker.io/magnetar/zookeeper-official:3.8"
OFFICIAL_ZOOKEEPER_TARBALL = IMAGES_DIR / "official" / "zookeeper-official-3.8.tar"
#: the operator's default ZooKeeper image, as the kubelet names it
DEFAULT_ZOOKEEPER = "docker.io/library/zookeeper:3.9"


@pytest.fixture(scope="module")
def cluster(node: Node, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    if not OFFICIAL_ZOOKEEPER_TARBALL.exists():
        pytest.skip(f"no {OFFICIAL_ZOOKEEPER_TARBALL}: run `make image`")
    node.import_image(OFFICIAL_ZOOKEEPER_TARBALL)
    ctr(Layout(node.state_dir), "images", "tag", "--force", OFFICIAL_ZOOKEEPER, DEFAULT_ZOOKEEPER)
    return install_cluster(node, ROOT / "examples/k8s/cluster.yaml", CLUSTER, tmp_path_factory)


def test_zookeeper_of_the_default_image_runs_as_the_operators_user(cluster: Cluster) -> None:
    # The image's /conf belongs to its own user, uid 1000; the pod's user is the operator's.
    node, pod = cluster.node, f"{CLUSTER}-zookeeper-0"
    assert node.json("pod", pod)["spec"]["containers"][0]["image"] == "zookeeper:3.9"
    out = node.kubectl("exec", pod, "--", "sh", "-c", "id -u; stat -c %u /conf; ls /data/txnlog")
    assert out.returncode == 0, out.stderr
    uid, conf_owner, txnlog = out.stdout.split("\n", 2)
    assert (uid, conf_owner) == ("10000", "1000"), out.stdout
    # the transaction log is on the data volume, which a restart keeps
    assert "version-2" in txnlog, out.stdout


def test_every_pod_passes_its_readiness_probe_and_the_cluster_says_ready(cluster: Cluster) -> None:
    node = cluster.node
    pods = node.json("pods", "-A")["items"]
    names = {p["metadata"]["name"] for p in pods}
    wanted = {"region-a-zookeeper-0", "region-a-broker-0", "region-a-broker-1", "region-a-broker-readonly-0"}
    wanted |= {f"region-a-bookie-{i}" for i in range(3)}
    assert wanted <= names, names
    for pod in pods:
        ready = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}.get("Ready")
        assert ready == "True", f"{pod['metadata']['name']}: {pod['status']}"
    assert any(p["metadata"]["namespace"] == "magnetar" for p in pods), "no operator pod"
    # Every StatefulSet's pods carry the default soft placement, and the one node still ran them all.
    for pod in (p for p in pods if p["metadata"]["name"] in wanted):
        component = pod["metadata"]["labels"]["app.kubernetes.io/component"]
        anti = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert (
            anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"]["app.kubernetes.io/component"]
            == component
        )
        spread = pod["spec"]["topologySpreadConstraints"]
        assert [(c["topologyKey"], c["whenUnsatisfiable"]) for c in spread] == [
            ("topology.kubernetes.io/zone", "ScheduleAnyway")
        ], pod["metadata"]["name"]
    # Every volume bound to one of the node's local PersistentVolumes.
    claims = node.json("pvc")["items"]
    assert len(claims) == 7, [c["metadata"]["name"] for c in claims]  # ZooKeeper 1, bookies 3 x 2
    assert {c["status"]["phase"] for c in claims} == {"Bound"}
    doc = node.json("mgc", CLUSTER)
    ready = condition(doc, "Ready")
    assert ready["status"] == "True", doc["status"]
    assert ready["reason"] == "Converged", doc["status"]
    assert doc["status"]["serviceUrlTls"] == f"pulsar+ssl://{CLUSTER}-broker.{NAMESPACE}.svc:6651"


def test_coredns_answers_each_pod_by_its_name_under_its_headless_service(cluster: Cluster) -> None:
    # The names bookies and brokers advertise and ZooKeeper's servers find each other by.
    for pod in cluster.node.json("pods")["items"]:
        name = pod["metadata"]["name"]
        component = pod["metadata"]["labels"]["app.kubernetes.io/component"]
        service = f"{CLUSTER}-bookie" if component == "bookie" else f"{CLUSTER}-{component}-headless"
        fqdn = f"{name}.{service}.{NAMESPACE}.svc.cluster.local"
        assert resolve_a(fqdn, NODE_IP) == [pod["status"]["podIP"]], fqdn


def test_the_official_client_produces_and_consumes_through_the_broker_service(cluster: Cluster) -> None:
    client_ = cluster.client()
    try:
        topic = "persistent://public/default/through-the-service"
        consumer = client_.subscribe(topic, "pods")
        producer = client_.create_producer(topic)
        for i in range(100):
            producer.send(f"message-{i}".encode())
        received = []
        for _ in range(100):
            message = consumer.receive(timeout_millis=15_000)
            received.append(message.data().decode())
            consumer.acknowledge(message)
        assert received == [f"message-{i}" for i in range(100)]
    finally:
        client_.close()


def test_topics_owned_by_either_broker_are_reached_from_this_machine(cluster: Cluster) -> None:
    # Bundles spread over both serving brokers: some lookups through the Service are redirected to
    # the other broker, by the address of the pod-ip listener.
    client_ = cluster.client()
    try:
        for t in range(8):
            topic = f"persistent://public/default/spread-{t}"
            consumer = client_.subscribe(topic, "pods")
            client_.create_producer(topic).send(f"to {t}".encode())
            assert consumer.receive(timeout_millis=15_000).data() == f"to {t}".encode()
    finally:
        client_.close()


def admin(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    # HTTPS checked against the cluster's CA (not the host name, as Pulsar's clients by default: the
    # certificate names the Service's DNS names, this machine reaches it by its ClusterIP).
    return magnetar("admin", "--admin-url", f"https://{cluster.broker_ip}:8443",
                    "--tls-trust-certs-file-path", str(cluster.ca_file), "--auth-plugin", "token",
                    "--auth-params", f"file://{cluster.token_file}", *args, timeout=60)  # fmt: skip


def test_magnetar_admin_works_through_the_admin_service(cluster: Cluster) -> None:
    tenants = admin(cluster, "tenants", "list")
    assert tenants.returncode == 0, tenants.stdout + tenants.stderr
    assert "public" in tenants.stdout
    created = admin(cluster, "namespaces", "create", "public/from-the-host")
    assert created.returncode == 0, created.stdout + created.stderr
    listed = admin(cluster, "namespaces", "list", "public")
    assert "public/from-the-host" in listed.stdout, listed.stdout + listed.stderr
    # Without the token the secured cluster refuses.
    url, ca = f"https://{cluster.broker_ip}:8443", str(cluster.ca_file)
    anonymous = magnetar("admin", "--admin-url", url, "--tls-trust-certs-file-path", ca, "tenants", "list")
    assert anonymous.returncode != 0


def test_a_magnetar_namespace_becomes_a_namespace_of_the_admin_api(cluster: Cluster) -> None:
    node = cluster.node
    applied = node.kubectl("apply", "-f", str(ROOT / "examples/k8s/namespace.yaml"))
    assert applied.returncode == 0, applied.stderr

    def ready() -> bool:
        out = node.kubectl("get", "mgns", "acme-orders", "-o", "json")
        return out.returncode == 0 and condition(json.loads(out.stdout), "Ready").get("status") == "True"

    wait_for("the MagnetarNamespace Ready", ready, node, 120)
    listed = admin(cluster, "namespaces", "list", "acme")
    assert "acme/orders" in listed.stdout, listed.stdout + listed.stderr
    bundles = admin(cluster, "namespaces", "bundles", "acme/orders")
    assert bundles.returncode == 0, bundles.stdout + bundles.stderr
    assert bundles.stdout.count("0x") >= 5, bundles.stdout  # 4 bundles: 5 boundaries


def lookups_answered(cluster: Cluster) -> int:
    """Lookups every serving broker answered since it started (pulsar_broker_lookup_answers)."""
    total = 0
    for pod in cluster.pods("broker"):
        ip = cluster.node.json("pod", pod)["status"]["podIP"]
        with urllib.request.urlopen(f"http://{ip}:8080/metrics", timeout=30) as response:
            text = response.read().decode()
        total += sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
                     if line.startswith("pulsar_broker_lookup_answers_total"))  # fmt: skip
    return total


def test_a_transfer_asked_from_this_machine_moves_its_clients_without_a_lookup(cluster: Cluster) -> None:
    # The admin call goes through the Service to either broker, and is redirected to the owner by
    # its pod-ip listener's https:// address; the owner hands the bundle over and tells the
    # producer and consumer the next owner's address on the listener they came by, so they go
    # straight there: no lookup, nothing lost, in order.
    topic = "persistent://public/default/transferred"
    client_ = cluster.client()
    try:
        consumer = client_.subscribe(topic, "pods")
        producer = client_.create_producer(topic, batching_enabled=False)
        for i in range(20):
            producer.send(f"before-{i}".encode())
        owner = json.loads(admin(cluster, "topics", "lookup", topic).stdout)["brokerUrl"]
        brokers = admin(cluster, "brokers", "list", CLUSTER).stdout.split()  # one a line, as pulsar-admin
        bundle = json.loads(admin(cluster, "topics", "bundle-range", topic).stdout)
        # broker ids name the pods' DNS names; the lookup from here answers with pod IPs
        owner_pod = next(
            p for p in cluster.pods("broker") if cluster.node.json("pod", p)["status"]["podIP"] in owner
        )
        destination = next(b for b in brokers if not b.startswith(f"{owner_pod}."))
        lookups = lookups_answered(cluster)
        moved = admin(cluster, "namespaces", "unload", "public/default", "--bundle", bundle,
                      "--destinationBroker", destination)  # fmt: skip
        assert moved.returncode == 0, moved.stdout + moved.stderr
        for i in range(20):
            producer.send(f"after-{i}".encode())  # acknowledged by the new owner
        got = []
        for _ in range(40):
            message = consumer.receive(timeout_millis=30_000)
            got.append(message.data().decode())
            consumer.acknowledge(message)
        assert got == [f"before-{i}" for i in range(20)] + [f"after-{i}" for i in range(20)]
        assert lookups_answered(cluster) == lookups, "a client looked the topic up again after the move"
        assert json.loads(admin(cluster, "topics", "lookup", topic).stdout)["brokerUrl"] != owner
    finally:
        client_.close()


BROKEN = """
apiVersion: magnetar.dev/v1alpha1
kind: MagnetarCluster
metadata: {name: %(name)s}
spec:
  image: %(image)s
  metadataStore: {url: "zk://region-a-zookeeper.%(namespace)s.svc:2181/%(name)s"}
  auth: {enabled: false}
  tls: {enabled: false}
  bookies:
    replicas: 1
    ensembleSize: 1
    writeQuorum: 1
    ackQuorum: 1
    %(bookies)s
  brokers: {replicas: 1}
"""


def warning_events(node: Node, name: str) -> list[dict[str, Any]]:
    events = node.json("events", "--field-selector", f"involvedObject.name={name}")["items"]
    return [e for e in events if e["type"] == "Warning" and e["involvedObject"]["kind"] == "MagnetarCluster"]


@pytest.mark.parametrize(
    ("name", "image", "bookies", "reasons", "words"),
    [
        ("no-image", "magnetar:does-not-exist", "", {"ErrImagePull", "ImagePullBackOff"},
         "magnetar:does-not-exist"),
        # the scheduler's word on it: "persistentvolumeclaim … not found" while the StatefulSet
        # has yet to make the claim, "unbound immediate PersistentVolumeClaims" after
        ("no-volume", "magnetar:0.1.0", "storage: {storageClassName: does-not-exist}", {"Unschedulable"},
         "persistentvolumeclaim"),
        ("crash-loop", "magnetar:0.1.0", "resources: {limits: {memory: 24Mi}}", {"CrashLoopBackOff"},
         "OOMKilled"),
    ],
)  # fmt: skip
def test_a_pod_that_cannot_start_is_a_condition_with_its_reason_and_an_event(
    cluster: Cluster, name: str, image: str, bookies: str, reasons: set[str], words: str
) -> None:
    node = cluster.node
    manifest = BROKEN % {"name": name, "image": image, "bookies": bookies, "namespace": NAMESPACE}
    assert node.kubectl("apply", "-f", "-", stdin=manifest).returncode == 0
    try:

        def degraded() -> bool:
            doc = node.json("mgc", name)
            named = [e for e in warning_events(node, name) if e["reason"] in reasons]
            return condition(doc, "Degraded").get("reason") in reasons and bool(named)

        wait_for(f"{name}: Degraded with the pod's reason and a Warning Event", degraded, node, 120)
        found = condition(node.json("mgc", name), "Degraded")
        assert found["status"] == "True"
        assert f"{name}-bookie-0" in found["message"], found
        assert words.lower() in found["message"].lower(), found
        assert condition(node.json("mgc", name), "Ready")["status"] == "False"
        # A Warning Event of each reason on the way (a crash loop may first fail to start).
        events = [e for e in warning_events(node, name) if e["reason"] in reasons]
        assert all(f"{name}-bookie-0" in e["message"] for e in events), events
    finally:
        node.kubectl("delete", "mgc", name, "--wait=false")


def zookeeper_client(cluster: Cluster) -> KazooClient:
    """A ZooKeeper client on this machine, at the ZooKeeper pod's IP (the pod range is routed here)."""
    ip = cluster.node.json("pod", f"{CLUSTER}-zookeeper-0")["status"]["podIP"]
    zk = KazooClient(hosts=f"{ip}:2181", timeout=10)
    zk.start(timeout=60)
    return zk


def test_zookeeper_keeps_its_data_across_its_pods_replacement(cluster: Cluster) -> None:
    # Last in the module: ZooKeeper goes away for a while. Its transaction log is on the data
    # volume beside the snapshots; in the container (the image's /datalog) everything written
    # since the last snapshot (the one made at its start) would be gone with the pod.
    node, pod = cluster.node, f"{CLUSTER}-zookeeper-0"
    zk = zookeeper_client(cluster)
    try:
        zk.create("/written-before-the-restart", b"kept")
        region = set(zk.get_children(f"/magnetar/{CLUSTER}"))
    finally:
        zk.stop()
        zk.close()
    assert region, "nothing of the cluster's in ZooKeeper to compare"
    before = node.json("pod", pod)["metadata"]["uid"]
    deleted = node.kubectl("delete", "pod", pod, "--wait=true")
    assert deleted.returncode == 0, deleted.stderr

    def replaced_and_ready() -> bool:
        out = node.kubectl("get", "pod", pod, "-o", "json")
        if out.returncode != 0:
            return False
        doc = json.loads(out.stdout)
        ready = {c["type"]: c["status"] for c in doc["status"].get("conditions", [])}.get("Ready")
        return doc["metadata"]["uid"] != before and ready == "True"

    wait_for("ZooKeeper's pod replaced and ready", replaced_and_ready, node, 180)
    zk = zookeeper_client(cluster)
    try:
        assert zk.get("/written-before-the-restart")[0] == b"kept"
        assert set(zk.get_children(f"/magnetar/{CLUSTER}")) >= region
    finally:
        zk.stop()
        zk.close()
