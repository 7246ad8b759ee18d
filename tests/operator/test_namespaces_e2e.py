"""MagnetarNamespace and MagnetarBundle reconciled for real: an external-mode MagnetarCluster
points at a local Magnetar cluster of real processes (ZooKeeper, bookies, two brokers), the
operator applies namespaces through its admin REST, mirrors bundles, and carries out unloads,
transfers and splits patched into MagnetarBundle resources. Topics are made by the official
pulsar-client."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest
from kubernetes import client

from magnetar.bookie.layout import UNDER_REPLICATED
from magnetar.common.metadata import open_store
from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.local.supervisor import ClusterState, Supervisor
from magnetar.operator.gates import AdminDrainer, ClusterRef, MetadataReplicationGate
from magnetar.operator.resources import MetadataStoreSpec
from magnetar.operator.validation import parse_cluster
from tests.operator.conftest import condition, get_cr, wait_for, wait_for_event

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]
CUSTOM = ("magnetar.dev", "v1alpha1")
#: the client's own (C++) logger: a Python logger can abort the process at exit
#: (apache/pulsar-client-python#256)
_LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


class LocalCluster:
    def __init__(self, directory: Path) -> None:
        self.supervisor = Supervisor(directory)
        self.directory = directory

    @property
    def state(self) -> ClusterState:
        return ClusterState.load(self.directory)

    @property
    def admin_url(self) -> str:
        return str(self.state.regions["r1"]["web_service_url"])

    @property
    def service_url(self) -> str:
        return str(self.state.regions["r1"]["service_url"])

    def admin(self, method: str, path: str) -> Any:
        url = self.admin_url + path
        for _ in range(3):
            try:
                with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as r:
                    text = r.read().decode()
                    return json.loads(text) if text else None
            except urllib.error.HTTPError as exc:
                if exc.code == 307:
                    url = exc.headers["Location"]
                    continue
                raise
        raise AssertionError("redirect loop")


@pytest.fixture(scope="module")
def magnetar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        name="k8s-e2e",
        regions=[RegionSpec(name="r1", bookies=2, brokers=2, ledger=LedgerSpec())],
    )
    cluster = LocalCluster(tmp_path_factory.mktemp("magnetar") / "cluster")
    cluster.supervisor.up(spec)
    yield cluster
    cluster.supervisor.down()


def create(
    api: client.ApiClient, namespace: str, plural: str, kind: str, name: str, spec: dict[str, Any]
) -> None:
    body = {"apiVersion": "magnetar.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}
    client.CustomObjectsApi(api).create_namespaced_custom_object(*CUSTOM, namespace, plural, body)


def ready(api: client.ApiClient, namespace: str, plural: str, name: str) -> dict[str, Any] | None:
    obj = get_cr(api, plural, namespace, name)
    return obj if condition(obj).get("status") == "True" else None


def bundle_crs(api: client.ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    found = client.CustomObjectsApi(api).list_namespaced_custom_object(*CUSTOM, namespace, "magnetarbundles")
    return {b["spec"]["range"]: b for b in found["items"]}


def applied_namespace(
    api: client.ApiClient, k8s_namespace: str, magnetar: LocalCluster, namespace: str, bundles: int
) -> dict[str, Any]:
    """The local cluster as an external MagnetarCluster ``local``, and the MagnetarNamespace
    ``acme-<namespace>`` for ``acme/<namespace>`` on it, both Ready; the MagnetarNamespace."""
    create(api, k8s_namespace, "magnetarclusters", "MagnetarCluster", "local",
           {"clusterName": "r1", "external": {"adminUrl": magnetar.admin_url}})  # fmt: skip
    wait_for("local Ready", lambda: ready(api, k8s_namespace, "magnetarclusters", "local"))
    name = f"acme-{namespace}"
    create(api, k8s_namespace, "magnetarnamespaces", "MagnetarNamespace", name,
           {"cluster": "local", "tenant": "acme", "namespace": namespace, "bundles": bundles})  # fmt: skip
    return dict(wait_for(f"{name} Ready", lambda: ready(api, k8s_namespace, "magnetarnamespaces", name)))


def test_namespaces_and_bundles_are_reconciled_in_a_real_cluster(
    api: client.ApiClient, k8s_namespace: str, magnetar: LocalCluster, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    ns = applied_namespace(api, k8s_namespace, magnetar, "orders", bundles=2)
    assert ns["status"]["clusters"] == ["r1"]

    # The namespace exists in the cluster, with its clusters and bundles.
    assert "acme/orders" in magnetar.admin("GET", "/admin/v2/namespaces/acme")
    assert magnetar.admin("GET", "/admin/v2/namespaces/acme/orders/replication") == ["r1"]
    assert magnetar.admin("GET", "/admin/v2/namespaces/acme/orders/bundles")["numBundles"] == 2
    wait_for_event(api, k8s_namespace, "acme-orders", "Normal", "NamespaceCreated")

    # A topic makes its bundle owned; the mirror shows it.
    pc = pulsar.Client(magnetar.service_url, operation_timeout_seconds=30, logger=_LOG)
    try:
        producer = pc.create_producer("persistent://acme/orders/payments")
        producer.send(b"one")
        bundle = magnetar.admin("GET", "/admin/v2/persistent/acme/orders/payments/bundle")
        mirrored = wait_for(
            "the bundle mirrored with its topic",
            lambda: (
                (b := bundle_crs(api, k8s_namespace).get(bundle))
                and b.get("status", {}).get("topicCount")
                and b
            ),
        )
        assert mirrored["status"]["topics"] == ["persistent://acme/orders/payments"]
        counted = wait_for(
            "the published message counted",
            lambda: (
                (get_cr(api, "magnetarbundles", k8s_namespace, mirrored["metadata"]["name"]) or {})
                .get("status", {})
                .get("msgInCounter")
            ),
        )
        assert counted == 1
        boundaries = magnetar.admin("GET", "/admin/v2/namespaces/acme/orders/bundles")["boundaries"]
        assert set(bundle_crs(api, k8s_namespace)) == {
            f"{lo}_{hi}" for lo, hi in itertools.pairwise(boundaries)
        }
        owner = mirrored["status"]["owner"]
        brokers = magnetar.admin("GET", "/admin/v2/brokers/r1")
        assert owner in brokers
        other = next(b for b in brokers if b != owner)

        # Transfer through the resource: the bundle moves to the other broker.
        cr = mirrored["metadata"]["name"]
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            *CUSTOM, k8s_namespace, "magnetarbundles", cr,
            {"spec": {"action": {"type": "Transfer", "destinationBroker": other}}},
        )  # fmt: skip
        done = wait_for(
            "the transfer done",
            lambda: (
                (b := get_cr(api, "magnetarbundles", k8s_namespace, cr))
                and (b.get("status") or {}).get("lastAction", {}).get("type") == "Transfer"
                and b
            ),
        )
        assert done["status"]["lastAction"]["generation"] == done["metadata"]["generation"]
        producer.send(b"two")  # the producer follows the bundle
        lookup = magnetar.admin("GET", "/lookup/v2/topic/persistent/acme/orders/payments")
        assert lookup["brokerUrl"].endswith(other)
        wait_for(
            "the mirror sees the new owner",
            lambda: (
                (get_cr(api, "magnetarbundles", k8s_namespace, cr) or {}).get("status", {}).get("owner")
                == other
            ),
        )

        # Split: the cluster has one more bundle and the mirror retires the old range.
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            *CUSTOM, k8s_namespace, "magnetarbundles", cr, {"spec": {"action": {"type": "Split"}}}
        )
        wait_for(
            "3 bundles mirrored",
            lambda: len(crs := bundle_crs(api, k8s_namespace)) == 3 and bundle not in crs,
        )
        assert magnetar.admin("GET", "/admin/v2/namespaces/acme/orders/bundles")["numBundles"] == 3
        producer.send(b"three")
        producer.close()
    finally:
        pc.close()

    # Deleting the resource retains the namespace (the default policy) and says so.
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        *CUSTOM, k8s_namespace, "magnetarnamespaces", "acme-orders"
    )
    wait_for(
        "acme-orders gone", lambda: get_cr(api, "magnetarnamespaces", k8s_namespace, "acme-orders") is None
    )
    assert "acme/orders" in magnetar.admin("GET", "/admin/v2/namespaces/acme")


def test_an_unknown_cluster_is_a_condition_and_a_warning_not_a_crash(
    api: client.ApiClient, k8s_namespace: str, magnetar: LocalCluster, start_operator: Callable[..., Any]
) -> None:
    op = start_operator()
    create(api, k8s_namespace, "magnetarclusters", "MagnetarCluster", "local",
           {"clusterName": "r1", "external": {"adminUrl": magnetar.admin_url}})  # fmt: skip
    geo = {"cluster": "local", "tenant": "acme", "namespace": "geo", "clusters": ["r1", "nowhere"]}
    create(api, k8s_namespace, "magnetarnamespaces", "MagnetarNamespace", "no-such-region", geo)
    create(api, k8s_namespace, "magnetarnamespaces", "MagnetarNamespace", "no-such-cluster",
           {"cluster": "missing", "tenant": "acme", "namespace": "lost"})  # fmt: skip
    for name, reason in (("no-such-region", "UnknownCluster"), ("no-such-cluster", "ClusterNotFound")):
        degraded = wait_for(
            f"{name} Degraded {reason}",
            lambda name=name, reason=reason: (
                (c := condition(get_cr(api, "magnetarnamespaces", k8s_namespace, name), "Degraded")).get(
                    "reason"
                )
                == reason
                and c
            ),
        )
        assert degraded["status"] == "True"
        wait_for_event(api, k8s_namespace, name, "Warning", reason)
    assert (
        "nowhere"
        in condition(get_cr(api, "magnetarnamespaces", k8s_namespace, "no-such-region"), "Degraded")[
            "message"
        ]
    )
    with pytest.raises(urllib.error.HTTPError):
        magnetar.admin("GET", "/admin/v2/namespaces/acme/geo")
    assert op.error is None


async def test_the_restart_gates_read_the_real_cluster(magnetar: LocalCluster) -> None:
    zk = str(magnetar.state.regions["r1"]["metadata_store"])
    spec = parse_cluster(
        {"clusterName": "r1", "metadataStore": {"url": zk}, "external": {"adminUrl": magnetar.admin_url}},
        "local",
    )
    ref = ClusterRef("local", "default", spec)

    # Under-replication: the auditor's marks in the metadata store, counted. The marks go to a
    # chroot of their own, where no replication worker of the running cluster would clear them.
    gate = MetadataReplicationGate()
    assert await gate.under_replicated(ref) == 0
    marks = zk.rstrip("/") + "/gate-test"
    ref = ClusterRef(
        "local", "default", spec.model_copy(update={"metadata_store": MetadataStoreSpec(url=marks)})
    )
    assert await gate.under_replicated(ref) == 0
    store = await open_store(marks)
    try:
        await store.create(f"{UNDER_REPLICATED}/L999999", b"{}", make_parents=True)
        await store.create(f"{UNDER_REPLICATED}/L999998", b"{}")
        assert await gate.under_replicated(ref) == 2
        await store.delete(f"{UNDER_REPLICATED}/L999999")
        await store.delete(f"{UNDER_REPLICATED}/L999998")
    finally:
        await store.close()
    assert await gate.under_replicated(ref) == 0
    ref = ClusterRef("local", "default", spec)

    # Drain: every bundle the broker owns moves to the other broker; clients keep going.
    pc = pulsar.Client(magnetar.service_url, operation_timeout_seconds=30, logger=_LOG)
    try:
        producer = await asyncio.to_thread(pc.create_producer, "persistent://public/default/drained")
        await asyncio.to_thread(producer.send, b"before")
        lookup = magnetar.admin("GET", "/lookup/v2/topic/persistent/public/default/drained")
        owner = lookup["brokerUrl"].split("://", 1)[1]
        moved = await AdminDrainer().drain_broker(ref, owner)
        bundle = magnetar.admin("GET", "/admin/v2/persistent/public/default/drained/bundle")
        assert f"public/default/{bundle}" in moved
        after = magnetar.admin("GET", "/lookup/v2/topic/persistent/public/default/drained")
        assert not after["brokerUrl"].endswith(owner)
        await asyncio.to_thread(producer.send, b"after")
        await asyncio.to_thread(producer.close)
    finally:
        await asyncio.to_thread(pc.close)


def test_a_namespace_deleted_while_its_cluster_answers_nothing_goes_at_once(
    api: client.ApiClient, k8s_namespace: str, magnetar: LocalCluster, start_operator: Callable[..., Any]
) -> None:
    """kopf lets a deleted resource go only once its timers have stopped, and never cancels a
    timer's pass: the bundle mirror's pass on a cluster whose brokers are frozen must not hold the
    deletion for its admin calls' 30 s timeouts, nor for kopf's 60 s between looks at a timer."""
    start_operator()
    applied_namespace(api, k8s_namespace, magnetar, "frozen", bundles=1)
    brokers = magnetar.state.find("broker")
    ports = {urllib.parse.urlsplit(b.endpoints["web_service_url"]).port for b in brokers}
    for broker in brokers:
        os.kill(broker.pid, signal.SIGSTOP)
    try:
        wait_for("the mirror's admin call waiting on a frozen broker", lambda: unread(ports))
        client.CustomObjectsApi(api).delete_namespaced_custom_object(
            *CUSTOM, k8s_namespace, "magnetarnamespaces", "acme-frozen"
        )
        wait_for(
            "acme-frozen gone while its brokers answer nothing",
            lambda: get_cr(api, "magnetarnamespaces", k8s_namespace, "acme-frozen") is None,
            timeout_s=20,
        )
    finally:
        for broker in brokers:
            os.kill(broker.pid, signal.SIGCONT)


def unread(ports: set[int | None]) -> bool:
    """A connection to one of ``ports`` that waits to be accepted, or a request on one that waits
    to be read (/proc/net/tcp: local address, state, then the send and receive queues)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        port = int(fields[1].rsplit(":", 1)[1], 16)
        if port in ports and int(fields[4].split(":")[1], 16) > 0:
            return True
    return False
