"""The operator's promises on real pods under a workload, as a user notices them:

- bookies scale up and down by `kubectl patch`: a new bookie pod becomes Ready, registers as a
  writable bookie and ledgers are written to it; scaling down decommissions the leaving bookie —
  by the time the MagnetarCluster says Ready again no ledger names it and nothing is
  under-replicated — and every message acknowledged to the producers meanwhile is consumed after;
- the operator's own pod deleted mid-rollout: the new operator pod finishes the rolling restart
  without restarting again a pod the first one had already replaced;
- a MagnetarBundle's Transfer, Unload and Split by `kubectl patch`: the operator's admin calls,
  made from inside the cluster, move the bundle (its owner per the admin API is the destination)
  while a producer keeps getting receipts, nothing acknowledged lost;
- brokers autoscaled on their load reports (spec.brokers.autoscaling, a LoadManager target the
  workload stays far below): min raised to 3 adds a broker and bundles are moved onto it, min
  lowered to 2 takes it away after the stabilization window, its bundles moved off first; the
  lab's longest producer window in each is printed;
- every StatefulSet the operator made, and every pod, carries the default anti-affinity (one pod
  of a component a host where it can be) and topology spread (over zones);
- a volume claim template's size changed, which the API server refuses to do in place: the bookies'
  StatefulSet is deleted with its pods orphaned (they keep running) and made again; it owns the
  pods, rolled in order onto the same claims, and the bookies take writes again;
- a version upgrade, `spec.image` to the second image `make image` builds (the same sources,
  reporting 0.1.0+next): status.upgrade goes bookies, brokers, done; every bookie is replaced before
  any broker; every pod runs the new image and its process says so (a broker's CONNECTED,
  `magnetar --version` in each container); the post-mortem's disruption windows printed. These two
  change the cluster for good, so they come last.

Each runs under the chaos lab's workload at 500 msg/s (the official client in its own process, the
event log of architecture §6), whose every acknowledged send must be received; beside it, the test's own
official-client producers at a modest rate check what the lab's workload does not (ledgers on a new
bookie, each receipt after a move). Both reach the brokers at their pod IPs (token, the pod-ip
listener); the metadata store is read from here through the ZooKeeper Service's ClusterIP. One
cluster for the module, in a Kubernetes namespace of its own on the package's node (conftest.py;
about 9 minutes on 2 cores at load 10; the last two tests about 3 of them, the upgrade's
post-mortem 40 s).
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from magnetar.bookie.autorecovery.marks import UnderReplication
from magnetar.bookie.client import BKError, LedgerClient, LedgerClientConfig
from magnetar.common.metadata import open_store
from tests.chaos.eventlog import events as lab_events
from tests.chaos.eventlog import producer_windows
from tests.kube.pods.harness import (
    NEXT_IMAGE,
    NEXT_TARBALL,
    ROOT,
    Cluster,
    Node,
    assert_nothing_lost,
    condition,
    install_cluster,
    lab_workload,
    module_namespace,
    post_mortem,
    server_version,
    wait_for,
)

pulsar = pytest.importorskip("pulsar", reason="the official pulsar-client (pip install -e .[workload])")

pytestmark = pytest.mark.kube

CLUSTER = "region-a"
NAMESPACE = "promises"


@pytest.fixture(scope="module")
def node(chart: Node) -> Iterator[Node]:
    yield from module_namespace(chart, NAMESPACE)


@pytest.fixture(scope="module")
def cluster(node: Node, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    return install_cluster(node, ROOT / "examples/k8s/local/cluster.yaml", CLUSTER, tmp_path_factory)


# -- what the metadata store says -------------------------------------------------------------------


@dataclass
class Storage:
    writable: list[str]
    #: ledger id -> every bookie of its ensembles
    ledgers: dict[int, set[str]]
    under_replicated: list[int]

    def using(self, prefix: str) -> list[int]:
        return sorted(i for i, bookies in self.ledgers.items() if any(b.startswith(prefix) for b in bookies))


def storage(cluster: Cluster) -> Storage:
    zookeeper = cluster.node.json("service", f"{CLUSTER}-zookeeper")["spec"]["clusterIP"]

    async def read() -> Storage:
        store = await open_store(f"zk://{zookeeper}:2181/magnetar/{CLUSTER}")
        try:
            async with LedgerClient(store, LedgerClientConfig()) as client:
                writable = sorted(r.bookie_id for r in await client.directory.writable())
                ledgers = {}
                for ledger_id in await client.ledger_ids():
                    try:
                        ledgers[ledger_id] = (await client.ledger_metadata(ledger_id)).bookies()
                    except BKError:
                        continue  # deleted since the listing
                marks = await UnderReplication(store).ledgers()
                return Storage(writable, ledgers, marks)
        finally:
            await store.close()

    return asyncio.run(read())


def bookie_prefix(ordinal: int) -> str:
    """The start of a bookie pod's id (its stable DNS name, then the port)."""
    return f"{CLUSTER}-bookie-{ordinal}."


# -- a workload of the official client ------------------------------------------------------------


@dataclass
class Workload:
    """Producers on ``topics`` at about ``rate`` messages a second in all, from a thread; every
    topic has a durable subscription made before the first message, so whatever was acknowledged
    can be consumed afterwards."""

    cluster: Cluster
    topics: list[str]
    rate: float = 60.0
    acked: dict[str, list[str]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    sent: int = 0
    #: per topic, how long the subscription took to deliver its first message in ``lost``
    first_delivery_s: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.client = self.cluster.client()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        for topic in self.topics:
            self.client.subscribe(topic, "check").close()
            self.acked[topic] = []
        self.producers = {t: self.client.create_producer(t, block_if_queue_full=True) for t in self.topics}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Workload:
        self._thread.start()
        return self

    def _run(self) -> None:
        interval = len(self.topics) / self.rate
        i = 0
        while not self._stop.is_set():
            for topic, producer in self.producers.items():
                payload = f"{topic}#{i}"
                producer.send_async(payload.encode(), self._callback(topic, payload))
                self.sent += 1
            i += 1
            self._stop.wait(interval)

    def _callback(self, topic: str, payload: str) -> Any:
        def done(result: Any, _msg_id: Any) -> None:
            with self._lock:
                if result == pulsar.Result.Ok:
                    self.acked[topic].append(payload)
                else:
                    self.failed.append(f"{payload}: {result}")

        return done

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        for producer in self.producers.values():
            producer.flush()
            producer.close()

    def lost(self) -> dict[str, list[str]]:
        """Acknowledged messages that the subscription does not deliver, by topic. The first
        message is awaited for up to a minute, each next one 10 s: a subscription that starts
        late is told apart from one that lost messages (``slow_starts``)."""
        missing = {}
        for topic in self.topics:
            subscribed = time.monotonic()
            consumer = self.client.subscribe(topic, "check")
            received: set[str] = set()
            wanted = set(self.acked[topic])
            try:
                while not wanted <= received:  # then waits out a receive only when one is missing
                    message = consumer.receive(timeout_millis=10_000 if received else 60_000)
                    if not received:
                        self.first_delivery_s[topic] = time.monotonic() - subscribed
                    received.add(message.data().decode())
                    consumer.acknowledge(message)
            except pulsar.Timeout:
                pass
            finally:
                consumer.close()
            gone = [p for p in self.acked[topic] if p not in received]
            if gone:
                missing[topic] = gone
        return missing

    def slow_starts(self, bound_s: float = 10.0) -> dict[str, str]:
        """Topics whose subscription delivered its first message only after ``bound_s``."""
        return {t: f"{s:.1f} s" for t, s in self.first_delivery_s.items() if s > bound_s}

    def close(self) -> None:
        self.client.close()

    @property
    def acked_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())


# -- the MagnetarCluster ----------------------------------------------------------------------------


def patch(node: Node, spec: dict[str, Any]) -> int:
    """Merge ``spec`` into the cluster's spec; the generation that asks for it."""
    out = node.kubectl("patch", "mgc", CLUSTER, "--type=merge", "-p", json.dumps({"spec": spec}))
    assert out.returncode == 0, out.stderr
    return int(node.json("mgc", CLUSTER)["metadata"]["generation"])


def ready_at(node: Node, generation: int) -> bool:
    doc = node.json("mgc", CLUSTER)
    ready = condition(doc, "Ready")
    return (
        ready.get("status") == "True"
        and ready.get("reason") == "Converged"
        and ready.get("observedGeneration") == generation
    )


def pod_ready(node: Node, name: str) -> bool:
    out = node.kubectl("get", "pod", name, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}")
    return out.returncode == 0 and out.stdout.strip() == "True"


def events(node: Node, reason: str) -> list[str]:
    found = node.json("events", "--field-selector", f"involvedObject.name={CLUSTER},reason={reason}")["items"]
    return [e["message"] for e in sorted(found, key=lambda e: e["metadata"]["creationTimestamp"])]


# -- the tests --------------------------------------------------------------------------------------


def test_bookies_scale_up_and_down_under_a_workload_and_nothing_acknowledged_is_lost(
    cluster: Cluster, tmp_path: Path
) -> None:
    node = cluster.node
    with lab_workload(cluster, tmp_path, "persistent://public/default/scaling") as run_dir:
        scale_bookies_up_and_down(cluster)
    assert_nothing_lost(run_dir, node)


def scale_bookies_up_and_down(cluster: Cluster) -> None:
    node = cluster.node
    workload = Workload(cluster, [f"persistent://public/default/scale-{t}" for t in range(4)]).start()
    try:
        time.sleep(5)
        # 3 -> 4: the new pod is Ready, registers as a writable bookie, and ledgers are written to it.
        generation = patch(node, {"bookies": {"replicas": 4}})
        wait_for("region-a-bookie-3 Ready", lambda: pod_ready(node, f"{CLUSTER}-bookie-3"), node, 180)
        wait_for("the cluster Ready with 4 bookies", lambda: ready_at(node, generation), node, 180)
        assert any(b.startswith(bookie_prefix(3)) for b in storage(cluster).writable), storage(cluster)
        # New topics open new ledgers: the brokers place some of them on the new bookie (E=2 over
        # two racks, each of 2 bookies then: each ledger has about one chance in two).
        fresh = Workload(
            cluster, [f"persistent://public/default/after-{t}" for t in range(12)], rate=60
        ).start()
        time.sleep(5)
        fresh.stop()
        assert fresh.acked_count > 0
        on_new = storage(cluster).using(bookie_prefix(3))
        assert on_new, "no ledger was placed on the new bookie"
        fresh_lost = fresh.lost()
        fresh.close()
        assert fresh_lost == {}
        assert fresh.slow_starts() == {}

        # 4 -> 3: when the cluster says Ready again, the leaving bookie is decommissioned.
        generation = patch(node, {"bookies": {"replicas": 3}})
        wait_for("the cluster Ready with 3 bookies", lambda: ready_at(node, generation), node, 300)
        found = storage(cluster)
        assert not any(b.startswith(bookie_prefix(3)) for b in found.writable), found.writable
        assert found.using(bookie_prefix(3)) == [], "ledgers still name the removed bookie when Ready"
        assert found.under_replicated == [], "ledgers under-replicated when Ready"
        assert cluster.pods("bookie") == [f"{CLUSTER}-bookie-{i}" for i in range(3)]
        time.sleep(3)
    finally:
        workload.stop()
    try:
        assert workload.acked_count > 100, "the workload wrote too little to tell"
        assert workload.lost() == {}
        assert workload.slow_starts() == {}
    finally:
        workload.close()


def test_the_operators_pod_deleted_mid_rollout_and_its_successor_finishes_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    with lab_workload(cluster, tmp_path, "persistent://public/default/operator-gone") as run_dir:
        delete_the_operator_mid_rollout(cluster)
    assert_nothing_lost(run_dir, cluster.node)


def delete_the_operator_mid_rollout(cluster: Cluster) -> None:
    node = cluster.node
    bookies = cluster.pods("bookie")
    assert bookies == [f"{CLUSTER}-bookie-{i}" for i in range(3)]
    before = {p: node.json("pod", p)["metadata"]["uid"] for p in bookies}
    operator_pods = node.json("pods", "-n", "magnetar")["items"]
    assert len(operator_pods) == 1
    operator_uid = operator_pods[0]["metadata"]["uid"]
    restarting_before = len(events(node, "RestartingPod"))

    def uid(pod: str) -> str | None:
        out = node.kubectl("get", "pod", pod, "-o", "jsonpath={.metadata.uid}")
        return out.stdout.strip() or None if out.returncode == 0 else None

    # A bookie setting: the operator restarts bookies one at a time, the highest ordinal first.
    generation = patch(node, {"bookies": {"config": {"journal_max_group_wait_msec": 3}}})
    first = f"{CLUSTER}-bookie-2"
    wait_for(
        f"{first} replaced and Ready",
        lambda: uid(first) not in (None, before[first]) and pod_ready(node, first),
        node,
        180,
    )
    replaced_first = uid(first)
    others_untouched = [p for p in bookies if p != first and uid(p) == before[p]]
    assert others_untouched, "the rollout finished before the operator could be deleted"
    deleted = node.kubectl(
        "delete", "pod", "-n", "magnetar", operator_pods[0]["metadata"]["name"], "--wait=false"
    )
    assert deleted.returncode == 0, deleted.stderr

    wait_for("the cluster Ready at the new configuration", lambda: ready_at(node, generation), node, 300)
    new_operator = node.json("pods", "-n", "magnetar")["items"]
    assert [p["metadata"]["uid"] for p in new_operator] != [operator_uid]
    after = {p: uid(p) for p in bookies}
    # Every bookie replaced, the one replaced before the operator's deletion not again.
    assert all(after[p] != before[p] for p in bookies), (before, after)
    assert after[first] == replaced_first, "the new operator restarted a pod the first had done"
    sts = node.json("statefulset", f"{CLUSTER}-bookie")
    want = sts["spec"]["template"]["metadata"]["annotations"]["magnetar.dev/config-hash"]
    for pod in bookies:
        assert node.json("pod", pod)["metadata"]["annotations"]["magnetar.dev/config-hash"] == want
    # One at a time, the highest ordinal first: the new pods were made in that order. (The events
    # say so too, but the one the first operator posts after deleting a pod can go with it.)
    made = sorted(bookies, key=lambda p: node.json("pod", p)["metadata"]["creationTimestamp"])
    assert made == [f"{CLUSTER}-bookie-{i}" for i in (2, 1, 0)], made
    restarts = [m.split()[1] for m in events(node, "RestartingPod")[restarting_before:]]
    assert restarts == sorted(set(restarts), reverse=True), restarts
    # And the bookies take writes again: every one registered writable. (CI once found only the
    # last one restarted registered right after Ready, and a new ledger failed "not enough
    # writable bookies" for a while; how long they take is not asserted, that they come back is.)
    took = wait_for("every bookie writable", lambda: len(storage(cluster).writable) == 3, node, 180)
    print(f"\nevery bookie writable again {took:.0f} s after the cluster said Ready")


# -- MagnetarBundle actions -------------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 307 is raised as an HTTPError: its Location names the owner


def rest(cluster: Cluster, path: str, listener: str | None = None) -> Any:
    """A GET of the brokers' admin REST from this machine (the token, the cluster's CA; the
    certificate names the Service's DNS names, reached here by its ClusterIP); a redirect is
    answered as ``{"redirect": <Location>}``, not followed."""
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    context.check_hostname = False
    headers = {"Authorization": f"Bearer {cluster.token}"}
    if listener:
        headers["X-Pulsar-ListenerName"] = listener
    request = urllib.request.Request(f"https://{cluster.broker_ip}:8443{path}", headers=headers)
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), _NoRedirect)
    try:
        with opener.open(request, timeout=30) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        if exc.code in (307, 308):
            return {"redirect": exc.headers["Location"]}
        raise


def owner(cluster: Cluster, topic: str) -> str:
    """The broker pod serving ``topic``, by the admin API's lookup on the brokers' internal
    listener (the one the operator's calls name), whose addresses are the pods' DNS names: the
    answer, or the redirect to the owner (a name this machine cannot resolve)."""
    found = rest(cluster, f"/lookup/v2/topic/persistent/public/default/{topic}", "internal")
    url = str(found.get("brokerUrl") or found["redirect"])
    return url.split("://", 1)[1].split(".", 1)[0]


def describe(lost: dict[str, list[str]], workload: Workload) -> str:
    return "; ".join(
        f"{topic}: {len(gone)} of {len(workload.acked[topic])} acknowledged not received "
        f"({gone[0]} .. {gone[-1]})"
        for topic, gone in lost.items()
    )


def each_broker(cluster: Cluster, path: str) -> list[str]:
    """Each broker pod's own answer to a GET of ``path`` (a redirect as its Location)."""
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    context.check_hostname = False
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), _NoRedirect)
    answers = []
    for pod in cluster.node.json("pods", "-l", f"app.kubernetes.io/instance={CLUSTER}")["items"]:
        if "broker" not in pod["metadata"]["name"]:
            continue
        request = urllib.request.Request(
            f"https://{pod['status']['podIP']}:8443{path}",
            headers={"Authorization": f"Bearer {cluster.token}", "X-Pulsar-ListenerName": "internal"},
        )
        try:
            with opener.open(request, timeout=10) as answer:
                answers.append(f"{pod['metadata']['name']}: {answer.read().decode()}")
        except urllib.error.HTTPError as exc:
            answers.append(f"{pod['metadata']['name']}: {exc.code} {exc.headers.get('Location')}")
        except OSError as exc:
            answers.append(f"{pod['metadata']['name']}: {exc}")
    return answers


def diagnose(cluster: Cluster, topic: str = "moving") -> str:
    """Each broker pod's own answer to the lookup and to the topic's internal stats (its ledgers,
    and where each cursor is), and the Service's endpoints."""
    answers = each_broker(cluster, f"/lookup/v2/topic/persistent/public/default/{topic}")
    answers += each_broker(cluster, f"/admin/v2/persistent/public/default/{topic}/internalStats")
    endpoints = cluster.node.kubectl("get", "endpoints", f"{CLUSTER}-broker", "-o", "wide").stdout
    return "\n".join([*answers, endpoints])


def bundle_events(node: Node, reason: str) -> list[str]:
    found = node.json("events", "--field-selector", f"involvedObject.name=moving,reason={reason}")["items"]
    return [e["message"] for e in found if e["involvedObject"]["kind"] == "MagnetarBundle"]


SERVING = re.compile(rf"^{CLUSTER}-broker-\d+\.")


def test_a_magnetar_bundle_transfer_unload_and_split_by_kubectl_patch_while_clients_produce(
    cluster: Cluster, tmp_path: Path
) -> None:
    # The lab's 500 msg/s on the topic whose bundle moves, beside the check's own producer.
    with lab_workload(cluster, tmp_path, "persistent://public/default/moving") as run_dir:
        move_a_bundle_by_kubectl_patch(cluster)
    assert_nothing_lost(run_dir, cluster.node)


def move_a_bundle_by_kubectl_patch(cluster: Cluster) -> None:
    node = cluster.node
    workload = Workload(cluster, ["persistent://public/default/moving"], rate=40).start()
    try:
        time.sleep(3)
        bundle = str(rest(cluster, "/admin/v2/persistent/public/default/moving/bundle"))
        before = owner(cluster, "moving")
        brokers = [b for b in rest(cluster, f"/admin/v2/brokers/{CLUSTER}") if SERVING.match(b)]
        destination = next(b for b in brokers if not b.startswith(f"{before}."))
        manifest = {
            "apiVersion": "magnetar.dev/v1alpha1",
            "kind": "MagnetarBundle",
            "metadata": {"name": "moving"},
            "spec": {"cluster": CLUSTER, "namespace": "public/default", "range": bundle},
        }
        applied = node.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
        assert applied.returncode == 0, applied.stderr

        def act(action: dict[str, Any]) -> dict[str, Any]:
            out = node.kubectl(
                "patch", "mgb", "moving", "--type=merge", "-p", json.dumps({"spec": {"action": action}})
            )
            assert out.returncode == 0, out.stderr
            generation = int(node.json("mgb", "moving")["metadata"]["generation"])

            def done() -> bool:
                last = (node.json("mgb", "moving").get("status") or {}).get("lastAction") or {}
                return last.get("generation") == generation

            wait_for(f"the MagnetarBundle's {action['type']} done", done, node, 120)
            return dict(node.json("mgb", "moving")["status"]["lastAction"])

        def keeps_producing() -> None:
            acked = workload.acked_count
            wait_for("the producer acknowledged again", lambda: workload.acked_count > acked + 40, node, 60)

        # Transfer: the operator (in the cluster) asks the admin API; the owner is the destination.
        last = act({"type": "Transfer", "destinationBroker": destination})
        assert last["type"] == "Transfer", last
        wait_for(
            "the bundle owned by the destination",
            lambda: owner(cluster, "moving") == destination.split(".", 1)[0],
            node,
            60,
        )
        assert owner(cluster, "moving") != before, diagnose(cluster)
        assert any(destination in m for m in bundle_events(node, "TransferDone")), "no TransferDone Event"
        keeps_producing()

        # Unload: the bundle is released and served again; the producer follows. (Which broker
        # takes it is the brokers' choice: on pods it was at times the read-only broker, whose
        # pool should never own a writable bundle — a broker bug, reported, not asserted here.)
        last = act({"type": "Unload"})
        assert last["type"] == "Unload", last
        assert any("Unloaded" in m for m in bundle_events(node, "UnloadDone")), "no UnloadDone Event"
        keeps_producing()

        # Split: the namespace has one bundle more, the two halves of the old one; the producer's
        # topic lands in one of them and it carries on.
        count = int(rest(cluster, "/admin/v2/namespaces/public/default/bundles")["numBundles"])
        last = act({"type": "Split"})
        assert last["type"] == "Split", last
        bundles = rest(cluster, "/admin/v2/namespaces/public/default/bundles")
        assert int(bundles["numBundles"]) == count + 1, bundles
        low, high = bundle.split("_")
        assert low in bundles["boundaries"], bundles
        assert high in bundles["boundaries"], bundles
        assert any("Split" in m for m in bundle_events(node, "SplitDone")), "no SplitDone Event"
        keeps_producing()
    finally:
        workload.stop()
    try:
        failed = workload.failed
        assert failed == [], f"{len(failed)} failed: {failed[:2]} .. {failed[-2:]}\n{node.diagnostics()}"
        lost = workload.lost()
        assert lost == {}, f"{describe(lost, workload)}\n{diagnose(cluster)}\n{node.diagnostics()}"
        slow = workload.slow_starts()
        assert slow == {}, f"delivered, but late: {slow}\n{diagnose(cluster)}\n{node.diagnostics()}"
    finally:
        workload.close()


# -- brokers autoscaled ---------------------------------------------------------------------------


def autoscaling_status(node: Node) -> dict[str, Any]:
    return dict((node.json("mgc", CLUSTER).get("status") or {}).get("autoscaling") or {})


def serving(cluster: Cluster, topics: list[str]) -> dict[str, str]:
    """The broker pod serving each of ``topics`` (of public/default) per the admin API's lookup,
    by broker; a topic whose lookup names no broker now (its bundle on its way) is left out."""
    found: dict[str, str] = {}
    for topic in topics:
        answer = rest(cluster, f"/lookup/v2/topic/persistent/public/default/{topic}", "internal")
        url = str(answer.get("brokerUrl") or answer.get("redirect") or "")
        if "://" in url:
            found.setdefault(url.split("://", 1)[1].split(".", 1)[0], topic)
        else:  # seen on pods while the bundle moved: said, to be looked into
            print(f"\nthe lookup of {topic} named no broker: {answer}")
    return found


def longest_window_ms(logged: list[dict[str, Any]], phase: tuple[int, int]) -> float:
    """The longest time a producer of the lab's workload waited for a receipt, among the windows
    that began within ``phase`` (wall-clock ns, as the event log's)."""
    start, end = phase
    return max(((e - s) / 1e6 for s, e in producer_windows(logged) if start <= s <= end), default=0.0)


def test_brokers_autoscale_2_to_3_to_2_under_a_workload_and_nothing_acknowledged_is_lost(
    cluster: Cluster, tmp_path: Path
) -> None:
    with lab_workload(cluster, tmp_path, "persistent://public/default/autoscaled") as run_dir:
        phases = autoscale_brokers_up_and_down(cluster)
    assert_nothing_lost(run_dir, cluster.node)
    logged = lab_events(run_dir)
    for phase, span in phases.items():
        took, window = (span[1] - span[0]) / 1e9, longest_window_ms(logged, span)
        print(f"\n{phase}: {took:.0f} s, the lab's longest producer window {window:.0f} ms")


def autoscale_brokers_up_and_down(cluster: Cluster) -> dict[str, tuple[int, int]]:
    """Autoscaling on the brokers' load reports, driven by its bounds: a target far above what the
    workload needs, min raised to 3 (a scale-up, bundles moved onto the new broker), then lowered
    to 2 (a scale-down after the stabilization window, the leaving broker drained first)."""
    node = cluster.node
    topics = [f"persistent://public/default/autoscale-{t}" for t in range(8)]
    workload = Workload(cluster, topics, rate=80).start()
    phases: dict[str, tuple[int, int]] = {}

    def autoscaling(minimum: int) -> dict[str, Any]:
        target = {"type": "LoadManager", "averageUtilization": 95}
        return {
            "autoscaling": {"min": minimum, "max": 3, "target": target, "scaleDownStabilizationSeconds": 10}
        }

    try:
        generation = patch(node, {"brokers": autoscaling(2)})
        wait_for("the cluster Ready, autoscaled", lambda: ready_at(node, generation), node, 120)
        # The operator reads the brokers' own load reports (each pod's admin REST, TLS and token).
        wait_for(
            "the brokers' load reports read",
            lambda: autoscaling_status(node).get("averageUtilization") is not None,
            node,
            120,
        )
        state = autoscaling_status(node)
        assert state["desiredBrokers"] == 2, state
        assert cluster.pods("broker") == [f"{CLUSTER}-broker-{i}" for i in range(2)]

        started = time.time_ns()
        patch(node, {"brokers": autoscaling(3)})
        new = f"{CLUSTER}-broker-2"
        wait_for(f"{new} Ready", lambda: pod_ready(node, new), node, 180)
        wait_for(
            f"bundles moved onto {new}",
            lambda: f"onto {new}" in str(autoscaling_status(node).get("lastScaleReason")),
            node,
            120,
        )
        phases["2 -> 3 brokers"] = (started, time.time_ns())
        state = autoscaling_status(node)
        moved = re.search(rf"moved (\d+) bundle\(s\) onto {new}", state["lastScaleReason"])
        assert moved is not None, state
        assert int(moved.group(1)) > 0, state
        assert "at least autoscaling.min=3" in state["lastScaleReason"], state
        names = [t.rsplit("/", 1)[1] for t in [*topics, "public/default/autoscaled"]]
        wait_for(
            f"a topic of the workloads served by {new}", lambda: new in serving(cluster, names), node, 60
        )
        assert events(node, "ScaledUp"), "no ScaledUp Event"

        started = time.time_ns()
        patch(node, {"brokers": autoscaling(2)})
        wait_for(
            f"{new} gone",
            lambda: cluster.pods("broker") == [f"{CLUSTER}-broker-{i}" for i in range(2)],
            node,
            180,
        )
        wait_for(
            "the status at 2 brokers",
            lambda: autoscaling_status(node).get("currentBrokers") == 2,
            node,
            60,
        )
        phases["3 -> 2 brokers"] = (started, time.time_ns())
        state = autoscaling_status(node)
        assert f"moved off {new} first" in state["lastScaleReason"], state
        assert events(node, "ScaledDown"), "no ScaledDown Event"
        owners = serving(cluster, names)
        assert new not in owners, owners
        # Back to a fixed count, for the tests after this one: nothing moves.
        generation = patch(node, {"brokers": {"autoscaling": None}})
        wait_for("the cluster Ready at 2 brokers", lambda: ready_at(node, generation), node, 120)
        assert cluster.pods("broker") == [f"{CLUSTER}-broker-{i}" for i in range(2)]
    finally:
        workload.stop()
    try:
        assert workload.acked_count > 100, "the workload wrote too little to tell"
        assert workload.failed == [], workload.failed[:3]
        lost = workload.lost()
        assert lost == {}, f"{describe(lost, workload)}\n{node.diagnostics()}"
        assert workload.slow_starts() == {}
    finally:
        workload.close()
    return phases


# -- placement --------------------------------------------------------------------------------------


def test_every_statefulset_the_operator_made_spreads_its_pods_over_hosts_and_zones(cluster: Cluster) -> None:
    node = cluster.node
    selector = f"app.kubernetes.io/instance={CLUSTER},app.kubernetes.io/managed-by=magnetar-operator"
    made = node.json("statefulsets", "-l", selector)["items"]
    components = ("zookeeper", "bookie", "broker", "broker-readonly")
    assert sorted(s["metadata"]["name"] for s in made) == sorted(f"{CLUSTER}-{c}" for c in components)
    for sts in made:
        name = sts["metadata"]["name"]
        component = sts["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
        own = {"app.kubernetes.io/instance": CLUSTER, "app.kubernetes.io/component": component}
        pod = sts["spec"]["template"]["spec"]
        # Soft, so this one-node cluster still schedules every pod: one pod a host where it can be.
        terms = (
            (pod.get("affinity") or {})
            .get("podAntiAffinity", {})
            .get("preferredDuringSchedulingIgnoredDuringExecution", [])
        )
        by = [(t["podAffinityTerm"]["topologyKey"], t["podAffinityTerm"]["labelSelector"]) for t in terms]
        assert by == [("kubernetes.io/hostname", {"matchLabels": own})], f"{name}: {pod.get('affinity')}"
        spread = pod.get("topologySpreadConstraints") or []
        assert [(c["topologyKey"], c["whenUnsatisfiable"], c["labelSelector"]) for c in spread] == [
            ("topology.kubernetes.io/zone", "ScheduleAnyway", {"matchLabels": own})
        ], f"{name}: {spread}"
    # and the pods carry them, as the scheduler read them
    for pod in node.json("pods", "-l", f"app.kubernetes.io/instance={CLUSTER}")["items"]:
        assert pod["spec"].get("topologySpreadConstraints"), pod["metadata"]["name"]
        assert pod["spec"].get("affinity", {}).get("podAntiAffinity"), pod["metadata"]["name"]


# -- changes to a StatefulSet the API server refuses, and version upgrades ---------------------------
# These change the cluster for good (its volumes, then its image): they come last in the module.


def pod_uid(node: Node, pod: str) -> str | None:
    out = node.kubectl("get", "pod", pod, "-o", "jsonpath={.metadata.uid}")
    return out.stdout.strip() or None if out.returncode == 0 else None


def running(node: Node, pod: str) -> tuple[str, bool] | None:
    """A pod's uid, and whether it is being deleted; None when it is gone."""
    out = node.kubectl("get", "pod", pod, "-o", "json")
    if out.returncode != 0:
        return None
    meta = json.loads(out.stdout)["metadata"]
    return meta["uid"], bool(meta.get("deletionTimestamp"))


def test_a_volume_claim_template_change_recreates_the_statefulset_and_nothing_acknowledged_is_lost(
    cluster: Cluster, tmp_path: Path
) -> None:
    with lab_workload(cluster, tmp_path, "persistent://public/default/recreate") as run_dir:
        recreate_the_bookies_statefulset(cluster)
    assert_nothing_lost(run_dir, cluster.node)


def recreate_the_bookies_statefulset(cluster: Cluster) -> None:
    node = cluster.node
    sts_name = f"{CLUSTER}-bookie"
    old_uid = node.json("statefulset", sts_name)["metadata"]["uid"]
    bookies = cluster.pods("bookie")
    before = {p: pod_uid(node, p) for p in bookies}
    claims = [f"{volume}-{pod}" for pod in bookies for volume in ("journal", "ledgers")]
    claims_before = {c: node.json("pvc", c)["metadata"]["uid"] for c in claims}
    recreating_before = len(events(node, "RecreatingStatefulSet"))

    # The ledgers' claim template 2Gi -> 3Gi: a field the API server never updates in place.
    generation = patch(node, {"bookies": {"storage": {"ledgers": "3Gi"}}})
    at_remaking: dict[str, tuple[str, bool] | None] = {}

    def remade() -> bool:
        out = node.kubectl("get", "statefulset", sts_name, "-o", "jsonpath={.metadata.uid}")
        if out.returncode != 0 or out.stdout.strip() in ("", old_uid):
            return False
        at_remaking.update({p: running(node, p) for p in bookies})
        return True

    wait_for(f"{sts_name} made again", remade, node, 180, interval_s=0.5)
    # The old StatefulSet went with its pods orphaned, not deleted: when the new one appears they
    # still run (but for the first the ordered roll may have started on, the highest ordinal).
    kept = {p for p, now in at_remaking.items() if now == (before[p], False)}
    assert kept >= set(bookies[:-1]), f"bookie pods when the StatefulSet was made again: {at_remaking}"

    wait_for("the cluster Ready with the new claim template", lambda: ready_at(node, generation), node, 300)
    sts = node.json("statefulset", sts_name)
    templates = {t["metadata"]["name"]: t["spec"] for t in sts["spec"]["volumeClaimTemplates"]}
    assert templates["ledgers"]["resources"]["requests"]["storage"] == "3Gi", templates
    said = events(node, "RecreatingStatefulSet")[recreating_before:]
    assert any("ledgers storage 2Gi -> 3Gi" in m and "Orphan" in m for m in said), said
    # The new StatefulSet owns every bookie pod, each of its current revision, and the claims are
    # the same ones (a claim that exists keeps its size: only a new pod's would be 3Gi).
    revision = sts["status"]["updateRevision"]
    for pod in cluster.pods("bookie"):
        meta = node.json("pod", pod)["metadata"]
        assert [o["uid"] for o in meta.get("ownerReferences", [])] == [sts["metadata"]["uid"]], meta
        assert meta["labels"]["controller-revision-hash"] == revision, (pod, meta["labels"], revision)
    assert {c: node.json("pvc", c)["metadata"]["uid"] for c in claims} == claims_before
    # The bookies take writes again: every one registered writable.
    wait_for("every bookie writable", lambda: len(storage(cluster).writable) == 3, node, 180)


def test_a_version_upgrade_under_the_lab_workload_goes_stage_by_stage_and_loses_nothing(
    cluster: Cluster, tmp_path: Path, spark: SparkSession
) -> None:
    if not NEXT_TARBALL.exists():
        pytest.skip(f"no {NEXT_TARBALL}: run `make image`")
    node = cluster.node
    node.import_image(NEXT_TARBALL)
    versions = broker_versions(cluster)
    assert set(versions.values()) == {"Magnetar 0.1.0"}, versions
    with lab_workload(cluster, tmp_path, "persistent://public/default/upgrade") as run_dir:
        upgrade(cluster)
    assert_nothing_lost(run_dir, node)
    head = post_mortem(run_dir, spark)["headline"]
    print(
        f"\nthe upgrade under the lab's workload: {head['windows']} disruption windows, the longest "
        f"{head['window_max_ms']:,.0f} ms (p50 {head['window_p50_ms']:,.0f} ms), longest unavailability "
        f"{head['max_unavailability_ms']:,.0f} ms; {head['losses']} lost of {head['events']:,} events"
    )
    assert head["losses"] == 0, head


def broker_versions(cluster: Cluster) -> dict[str, str]:
    """What each broker process (read-only ones too) says it is, by pod."""
    found = {}
    for component in ("broker", "broker-readonly"):
        for pod in cluster.pods(component):
            ip = cluster.node.json("pod", pod)["status"]["podIP"]
            found[pod] = server_version(ip, cluster.token)
    return found


def upgrade(cluster: Cluster) -> None:
    node = cluster.node
    target = NEXT_IMAGE.rsplit(":", 1)[1]
    generation = patch(node, {"image": NEXT_IMAGE})
    seen: list[dict[str, Any]] = []

    def done() -> bool:
        doc = node.json("mgc", CLUSTER)
        now = (doc.get("status") or {}).get("upgrade") or {}
        if now.get("targetVersion") == target and (not seen or seen[-1] != now):
            seen.append(now)
        ready = condition(doc, "Ready")
        return ready.get("status") == "True" and ready.get("observedGeneration") == generation

    took = wait_for("the upgrade done and the cluster Ready", done, node, 420)
    print(f"\nthe upgrade: {took:.0f} s from the patch to Ready; status.upgrade went {seen}")
    # Stage by stage, in order (ZooKeeper's image is its own, so it has nothing to roll here),
    # from the version every pod ran to the spec's.
    stages = [s["stage"] for s in seen]
    assert [s for s in stages if s != "zookeeper"] == ["bookies", "brokers", "done"], seen
    assert all(s["currentVersion"] == "0.1.0" for s in seen[:-1]), seen
    assert seen[-1] == {"stage": "done", "currentVersion": target, "targetVersion": target}, seen
    # Every bookie was replaced before any broker was.
    made = {}
    for component in ("bookie", "broker", "broker-readonly"):
        for pod in cluster.pods(component):
            made[pod] = node.json("pod", pod)["metadata"]["creationTimestamp"]
    last_bookie = max(t for p, t in made.items() if "-bookie-" in p)
    first_broker = min(t for p, t in made.items() if "-broker" in p)
    assert last_bookie <= first_broker, made
    # Every pod runs the new image, and its processes say so: the brokers' own handshakes, and
    # `magnetar --version` in each running container.
    for pod in made:
        status = node.json("pod", pod)["status"]["containerStatuses"]
        assert [s["image"].rsplit("/", 1)[-1] for s in status] == [NEXT_IMAGE], (pod, status)
        out = node.kubectl("exec", pod, "--", "magnetar", "--version")
        assert out.stdout.strip() == "magnetar, version 0.1.0+next", (pod, out.stdout, out.stderr)
    versions = broker_versions(cluster)
    assert set(versions.values()) == {"Magnetar 0.1.0+next"}, versions
