"""Three brokers, two bookies and a real ZooKeeper as separate processes (``magnetar local``):
lookups across brokers, the admin API, unload, transfer, SIGTERM of an owner, leader failover.
Every client is the official ``pulsar-client``."""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pulsar
import pytest

from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.local.supervisor import ClusterState, Supervisor, alive
from tests.broker.conftest import admin_call, send_until_received

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

#: the client's own (C++) logger: a Python logger can abort the process at exit
#: (apache/pulsar-client-python#256)
_LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


class Cluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.supervisor = Supervisor(directory)

    @property
    def state(self) -> ClusterState:
        return ClusterState.load(self.directory)

    def brokers(self) -> list[Any]:
        return [b for b in self.state.find("broker") if alive(b.pid)]

    def service_url(self, index: int = 0) -> str:
        return self.state.find("broker")[index].endpoints["service_url"]

    def admin_url(self, index: int = 0) -> str:
        return self.state.find("broker")[index].endpoints["web_service_url"]

    def admin(self, method: str, path: str, body: Any = None, index: int = 0) -> tuple[int, Any]:
        return admin_call(method, self.admin_url(index) + path, body)

    def client(self, index: int = 0, scheme: str = "pulsar") -> pulsar.Client:
        """A client given the broker's binary service URL, or (``http``) its web service URL, whose
        lookups then go over HTTP."""
        url = self.admin_url(index) if scheme == "http" else self.service_url(index)
        return pulsar.Client(url, operation_timeout_seconds=30, logger=_LOG)


def _spec(settings: dict[str, Any]) -> ClusterSpec:
    return ClusterSpec(
        name="multi",
        regions=[
            RegionSpec(
                name="r1",
                bookies=2,
                brokers=3,
                ledger=LedgerSpec(ensemble_size=2, write_quorum=2, ack_quorum=2),
                bookie_settings={"zk_timeout": 4000},
                broker_settings={"metadata_store_session_timeout_millis": 4000, **settings},
            )
        ],
    )


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers of a test's own, for the tests that stop, kill or freeze one of them or that
    pass extra broker settings (``indirect`` parametrization)."""
    c = Cluster(tmp_path / "cluster")
    c.supervisor.up(_spec(getattr(request, "param", {})))
    yield c
    c.supervisor.down()


@pytest.fixture(scope="module")
def _whole_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("multi") / "cluster")
    c.supervisor.up(_spec({}))
    yield c
    c.supervisor.down()


@pytest.fixture
def shared(_whole_cluster: Cluster) -> Cluster:
    """Three brokers with the default settings, shared by the tests that leave them whole (none
    stopped, killed or frozen, no settings of their own); each uses topics and a tenant of its
    own, so none sees another's data. Each starts with all three brokers running."""
    assert len(_whole_cluster.brokers()) == 3, "an earlier test left the shared cluster broken"
    return _whole_cluster


class Workload:
    """Producers on several topics at a steady rate, a consumer per topic; records what was
    acknowledged by the broker and what was received."""

    def __init__(self, client: pulsar.Client, topics: list[str], rate: float) -> None:
        self.topics = topics
        self.rate = rate
        # A full queue waits (as a producer configured for no loss does) instead of failing the
        # send: on a starved machine a move outlasts the 1,000 messages the queue holds at
        # 2,000 msg/s, and ProducerQueueIsFull is the client's, not the broker's.
        self.producers = [
            client.create_producer(
                t, batching_enabled=False, send_timeout_millis=60_000, block_if_queue_full=True
            )
            for t in topics
        ]
        self.consumers = [client.subscribe(t, "w", consumer_type=pulsar.ConsumerType.Shared) for t in topics]
        self.acked: set[str] = set()
        self.failed: list[str] = []
        self.received: list[str] = []
        self.receipts: list[float] = []
        self._stop = threading.Event()
        self._drained = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._produce, daemon=True)] + [
            threading.Thread(target=self._consume, args=(c,), daemon=True) for c in self.consumers
        ]

    def start(self) -> Workload:
        for thread in self._threads:
            thread.start()
        return self

    def _produce(self) -> None:
        sequence = 0
        interval = 1 / self.rate
        next_send = time.monotonic()
        while not self._stop.is_set():
            producer = self.producers[sequence % len(self.producers)]
            uid = f"{sequence}"

            def done(result: pulsar.Result, _id: pulsar.MessageId, uid: str = uid) -> None:
                with self._lock:
                    if result == pulsar.Result.Ok:
                        self.acked.add(uid)
                        self.receipts.append(time.monotonic())
                    else:
                        self.failed.append(f"{uid}:{result}")

            producer.send_async(uid.encode(), done, properties={"uid": uid})
            sequence += 1
            next_send += interval
            time.sleep(max(0.0, next_send - time.monotonic()))

    def _consume(self, consumer: pulsar.Consumer) -> None:
        # Until the drain is over, not merely until the producers stop: a consumer still
        # reconnecting after a move is quiet for a while and then catches up.
        while not self._drained.is_set():
            try:
                message = consumer.receive(500)
            except pulsar.Timeout:
                continue
            with self._lock:
                self.received.append(message.data().decode())
            consumer.acknowledge(message)

    def stop(self, drain_s: float = 60) -> None:  # waits only as long as the consumer is behind
        self._stop.set()
        for producer in self.producers:
            producer.flush()
        deadline = time.monotonic() + drain_s
        while time.monotonic() < deadline:
            with self._lock:
                if self.acked <= set(self.received):
                    break
            time.sleep(0.2)
        time.sleep(1)
        self._drained.set()
        for thread in self._threads:
            thread.join(5)

    @property
    def lost(self) -> set[str]:
        return self.acked - set(self.received)


def acknowledged(workload: Workload | PartitionedWorkload, count: int, timeout_s: float = 60) -> None:
    """Wait for ``count`` more acknowledgements than ``workload`` had: after its start, load has
    reached the brokers; after a move or a failure, it flows again."""
    target = len(workload.acked) + count
    deadline = time.monotonic() + timeout_s
    while len(workload.acked) < target:
        assert time.monotonic() < deadline, f"not {count} more acknowledgements in {timeout_s:.0f} s"
        time.sleep(0.05)


def topics(count: int, prefix: str) -> list[str]:
    return [f"persistent://public/default/{prefix}-{i}" for i in range(count)]


def owner_of(cluster: Cluster, topic: str, index: int = 0) -> str:
    _, found = cluster.admin("GET", f"/lookup/v2/topic/{topic.replace('://', '/', 1)}", index=index)
    return str(found["brokerUrl"])


def test_lookups_redirect_across_brokers_and_messages_flow(shared: Cluster) -> None:
    names = topics(12, "spread")
    client = shared.client(0)  # every client starts at broker 0; lookups send them on
    producers = [client.create_producer(t) for t in names]
    consumers = [client.subscribe(t, "s") for t in names]
    for index, producer in enumerate(producers):
        producer.send(f"m{index}".encode())
    assert [c.receive(10_000).data() for c in consumers] == [f"m{i}".encode() for i in range(12)]
    owners = {owner_of(shared, t) for t in names}
    assert len(owners) >= 2, f"bundles spread over brokers, got {owners}"
    web = {b.endpoints["service_url"]: b.endpoints["web_service_url"] for b in shared.brokers()}
    for topic in names:  # asked of broker 0, whichever owns it: its owner's admin URL
        _, found = shared.admin("GET", f"/lookup/v2/topic/{topic.replace('://', '/', 1)}", index=0)
        assert found["httpUrl"] == web[found["brokerUrl"]], found
    client.close()


def test_non_persistent_topics_are_looked_up_and_moved_like_persistent_ones(shared: Cluster) -> None:
    names = [f"non-persistent://public/default/np-spread-{i}" for i in range(8)]
    client = shared.client(0)
    consumers = [client.subscribe(t, "s") for t in names]
    producers = [client.create_producer(t, batching_enabled=False) for t in names]
    for index, producer in enumerate(producers):
        producer.send(f"m{index}".encode())
    assert [c.receive(10_000).data() for c in consumers] == [f"m{i}".encode() for i in range(8)]
    assert len({owner_of(shared, t) for t in names}) >= 2, "their bundles spread over brokers"

    topic, producer, consumer = names[0], producers[0], consumers[0]
    owner = owner_of(shared, topic)
    destination = next(b for b in shared.brokers() if b.endpoints["service_url"] != owner)
    _transfer(shared, topic, destination.address)
    send_until_received(producer, consumer, b"after the move", timeout_s=30)  # the consumer follows
    assert owner_of(shared, topic) == destination.endpoints["service_url"]
    status, stats = shared.admin("GET", "/admin/v2/non-persistent/public/default/np-spread-0/stats")
    assert status == 200
    assert "s" in stats["subscriptions"], stats
    client.close()


def test_a_compacted_topic_keeps_its_view_when_its_bundle_moves(shared: Cluster) -> None:
    topic = "persistent://public/default/compacted-moving"
    client = shared.client(0)
    producer = client.create_producer(topic, batching_enabled=False)
    for key, value in [("a", b"a1"), ("b", b"b1"), ("a", b"a2"), ("c", b"c1"), ("b", b"")]:
        producer.send(value, partition_key=key)
    path = "/admin/v2/persistent/public/default/compacted-moving/compaction"
    assert shared.admin("PUT", path)[0] == 204
    deadline = time.monotonic() + 30
    while (status := shared.admin("GET", path)[1])["status"] == "RUNNING":
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    assert status["status"] == "SUCCESS", status

    owner = owner_of(shared, topic)
    destination = next(b for b in shared.brokers() if b.endpoints["service_url"] != owner)
    _transfer(shared, topic, destination.address)
    producer.send(b"c2", partition_key="c")  # the tail, written at the new owner
    assert owner_of(shared, topic) == destination.endpoints["service_url"]
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got = []
    while reader.has_message_available():
        message = reader.read_next(5000)
        got.append((message.partition_key(), message.data()))
    assert got == [("a", b"a2"), ("c", b"c1"), ("c", b"c2")], "the compacted view, then the tail"
    client.close()


def _transfer(cluster: Cluster, topic: str, destination: str) -> None:
    bundle = _bundle_of(cluster, topic)
    path = f"/admin/v2/namespaces/public/default/{bundle}/unload?destinationBroker={destination}"
    assert cluster.admin("PUT", path)[0] == 200


def test_admin_api_shapes_and_errors(shared: Cluster) -> None:
    assert shared.admin("PUT", "/admin/v2/tenants/acme", {"allowedClusters": ["r1"]})[0] == 204
    assert shared.admin("PUT", "/admin/v2/namespaces/acme/orders", {"bundles": {"numBundles": 8}})[0] == 204
    status, bundles = shared.admin("GET", "/admin/v2/namespaces/acme/orders/bundles")
    assert status == 200
    assert bundles["numBundles"] == 8
    status, error = shared.admin("PUT", "/admin/v2/namespaces/acme/orders", {})
    assert status == 409
    assert "already exists" in error["reason"]
    status, error = shared.admin("GET", "/admin/v2/namespaces/acme/nope")
    assert status == 404
    assert "acme/nope" in error["reason"]
    status, error = shared.admin("PUT", "/admin/v2/namespaces/acme/orders/0xzz_0x10/unload")
    assert status == 412
    assert "invalid bundle" in error["reason"]
    status, error = shared.admin("POST", "/admin/v2/namespaces/acme/orders/replication", ["mars"])
    assert status == 412
    assert "mars" in error["reason"]
    status, brokers = shared.admin("GET", "/admin/v2/brokers/r1")
    assert status == 200
    assert len(brokers) == 3
    status, leader = shared.admin("GET", "/admin/v2/brokers/leaderBroker")
    assert leader["brokerId"] in brokers

    # A transfer to no broker is refused before anything moves; one to the owner is done already.
    topic = "persistent://public/default/shapes-transfer"
    client = shared.client(0)
    producer = client.create_producer(topic)
    owner = owner_of(shared, topic)
    owner_id = next(b.address for b in shared.brokers() if b.endpoints["service_url"] == owner)
    unload = f"/admin/v2/namespaces/public/default/{_bundle_of(shared, topic)}/unload?destinationBroker="
    status, error = shared.admin("PUT", unload + "10.255.255.1:1")
    assert status == 400
    assert "10.255.255.1:1 is not an active broker" in error["reason"]
    assert shared.admin("PUT", unload + owner_id)[0] == 200
    assert owner_of(shared, topic) == owner
    producer.send(b"still here")  # the producer was never moved
    client.close()


def _bundle_of(cluster: Cluster, topic: str) -> str:
    import zlib

    value = zlib.crc32(topic.encode()) & 0xFFFFFFFF
    _, bundles = cluster.admin("GET", "/admin/v2/namespaces/public/default/bundles")
    edges = [int(b, 16) for b in bundles["boundaries"]]
    for low, high in itertools.pairwise(edges):
        if low <= value < high or (high == 0xFFFFFFFF and value >= low):
            return f"0x{low:08x}_0x{high:08x}"
    raise AssertionError("no bundle")


def _lookups(cluster: Cluster) -> int:
    """Lookups answered by every broker since it started (pulsar_broker_lookup_answers)."""
    total = 0
    for index in range(len(cluster.state.find("broker"))):
        with urllib.request.urlopen(cluster.admin_url(index) + "/metrics", timeout=30) as response:
            text = response.read().decode()
        total += sum(
            int(float(line.rsplit(" ", 1)[1]))
            for line in text.splitlines()
            if line.startswith("pulsar_broker_lookup_answers_total")
        )
    return total


@pytest.mark.parametrize("move", ["unload", "transfer", "split", "split-and-unload"])
def test_moving_a_bundle_under_load_loses_nothing(shared: Cluster, move: str) -> None:
    """Unload and transfer move the bundle; a split (Pulsar's split-bundle) keeps its topics where
    they are, served throughout, unless asked to unload the halves too."""
    topic = f"persistent://public/default/moving-{move}"  # each case's own, on the shared cluster
    client = shared.client(0)
    workload = Workload(client, [topic], rate=2000).start()  # the rate
    acknowledged(workload, 1000)
    owner = owner_of(shared, topic)
    bundle = _bundle_of(shared, topic)
    path = f"/admin/v2/namespaces/public/default/{bundle}/unload"
    if move == "transfer":
        others = [b for b in shared.brokers() if b.endpoints["service_url"] != owner]
        path += f"?destinationBroker={others[0].address}"
    elif move.startswith("split"):
        path = f"/admin/v2/namespaces/public/default/{bundle}/split?unload={str(move != 'split').lower()}"
    lookups = _lookups(shared)
    status, answer = shared.admin("PUT", path)
    assert status == 200, answer
    acknowledged(workload, 2500)  # after an unload, only once the clients looked it up again
    if move in ("transfer", "split"):
        # transfer: the clients went straight to the new owner (assignedBrokerServiceUrl);
        # split: they were never disconnected. No lookup at all.
        assert _lookups(shared) == lookups
    else:
        assert _lookups(shared) > lookups  # after an unload, clients look their topic up again
    if move.startswith("split"):
        halves = answer["bundles"]
        assert _bundle_of(shared, topic) in halves, (halves, _bundle_of(shared, topic))  # read back
    if move == "split":
        assert owner_of(shared, topic) == owner
        for index in range(len(shared.state.find("broker"))):  # every broker sends lookups there
            assert owner_of(shared, topic, index) == owner
    workload.stop()
    assert not workload.lost, f"{len(workload.lost)} acknowledged messages never received"
    assert not workload.failed, f"{len(workload.failed)} sends failed"
    assert len(workload.acked) > 3000  # it ran (a loaded machine sends fewer than 2,000/s)
    if move == "transfer":
        assert owner_of(shared, topic) != owner
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    stored = []
    while reader.has_message_available():
        stored.append(reader.read_next(5000).data().decode())
    assert len(stored) == len(set(stored)), "a message was persisted twice"
    client.close()


def test_sigterm_of_an_owner_under_load_loses_nothing(cluster: Cluster) -> None:
    names = topics(4, "sigterm")
    client = cluster.client(0)
    workload = Workload(client, names, rate=400).start()
    acknowledged(workload, 200)
    owner = owner_of(cluster, names[0])
    victim = next(b for b in cluster.brokers() if b.endpoints["service_url"] == owner)
    if victim.endpoints["service_url"] == cluster.service_url(0):
        victim = next(
            b for b in cluster.brokers() if b.endpoints["service_url"] == owner_of(cluster, names[1])
        )
    os.kill(victim.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while alive(victim.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(victim.pid)
    # It left the registry for good: no broker lists it or places a bundle on it any more.
    status, listed = cluster.admin("GET", "/admin/v2/brokers/r1")
    assert status == 200
    assert victim.address not in listed
    assert len(listed) == 2
    acknowledged(workload, 400)  # every topic's producer is served again (they send in turn)
    workload.stop()
    assert not workload.lost, f"{len(workload.lost)} acknowledged messages never received"
    client.close()


def test_leader_fails_over(cluster: Cluster) -> None:
    _, leader = cluster.admin("GET", "/admin/v2/brokers/leaderBroker")
    victim = next(b for b in cluster.brokers() if b.address == leader["brokerId"])
    index = next(i for i, b in enumerate(cluster.state.find("broker")) if b.name != victim.name)
    os.kill(victim.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, now = cluster.admin("GET", "/admin/v2/brokers/leaderBroker", index=index)
        if status == 200 and now["brokerId"] != leader["brokerId"]:
            return
        time.sleep(0.5)
    raise AssertionError("no new leader within 30 s")


# -- the load manager --------------------------------------------------------------------------
#: brokers that report every second, balance every 3 s, shed whatever the throughput, and accept
#: injected load (PUT /admin/v2/internal/load) so a test can overload one of them
BALANCING = {
    "load_balancer_load_injection_enabled": True,
    "load_balancer_report_update_min_interval_millis": 1000,
    "load_balancer_shedding_interval_minutes": 0.05,
    "load_balancer_bundle_unload_min_throughput_threshold": 0,
}


def one_topic_per_bundle(namespace: str, bundles: int) -> list[str]:
    from magnetar.broker.namespace import even_boundaries, topic_hash

    edges = even_boundaries(bundles)
    found: dict[int, str] = {}
    for i in itertools.count():
        name = f"persistent://{namespace}/t{i}"
        index = next(j for j in range(bundles) if edges[j] <= topic_hash(name) < edges[j + 1])
        found.setdefault(index, name)
        if len(found) == bundles:
            return [found[j] for j in range(bundles)]
    raise AssertionError("unreachable")


def bundles_by_owner(cluster: Cluster, names: list[str], index: int = 0) -> dict[str, int]:
    owners: dict[str, int] = {}
    for name in names:
        _, found = cluster.admin(
            "GET", f"/lookup/v2/topic/persistent/{name.removeprefix('persistent://')}", index=index
        )
        owners[found["brokerUrl"]] = owners.get(found["brokerUrl"], 0) + 1
    return owners


def overload_and_wait_for_shedding(cluster: Cluster, names: list[str], victim: Any, index: int) -> None:
    """Inject 95 % CPU on ``victim`` and wait until the leader has moved all but one of its
    bundles to the other brokers."""
    url = victim.endpoints["service_url"]
    status, _ = cluster.admin(
        "PUT", "/admin/v2/internal/load", {"cpu": 95}, index=cluster_index(cluster, victim)
    )
    assert status == 200
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        owners = bundles_by_owner(cluster, names, index)
        if owners.get(url, 0) == 1:
            return
        time.sleep(1)
    raise AssertionError(f"the overloaded broker {url} kept its bundles: {owners}")


def cluster_index(cluster: Cluster, record: Any) -> int:
    return next(i for i, b in enumerate(cluster.state.find("broker")) if b.name == record.name)


def busiest(cluster: Cluster, names: list[str], index: int, exclude: frozenset[str] = frozenset()) -> Any:
    owners = bundles_by_owner(cluster, names, index)
    candidates = [b for b in cluster.brokers() if b.address not in exclude]
    return max(candidates, key=lambda b: owners.get(b.endpoints["service_url"], 0))


@pytest.mark.parametrize("cluster", [BALANCING], indirect=True)
def test_leader_sheds_bundles_of_an_overloaded_broker(cluster: Cluster) -> None:
    assert cluster.admin("PUT", "/admin/v2/namespaces/public/lb", {"bundles": {"numBundles": 6}})[0] == 204
    names = one_topic_per_bundle("public/lb", 6)
    client = cluster.client(0)
    workload = Workload(client, names, rate=120).start()
    acknowledged(workload, 120)
    victim = busiest(cluster, names, 0)
    assert bundles_by_owner(cluster, names)[victim.endpoints["service_url"]] >= 2
    overload_and_wait_for_shedding(cluster, names, victim, 0)
    acknowledged(workload, 120)
    workload.stop()
    assert not workload.lost, f"{len(workload.lost)} acknowledged messages never received"
    assert not workload.failed
    client.close()


@pytest.mark.parametrize("cluster", [BALANCING], indirect=True)
def test_a_new_leader_keeps_balancing_after_the_leader_dies(cluster: Cluster) -> None:
    assert cluster.admin("PUT", "/admin/v2/namespaces/public/lb", {"bundles": {"numBundles": 6}})[0] == 204
    names = one_topic_per_bundle("public/lb", 6)
    _, leader = cluster.admin("GET", "/admin/v2/brokers/leaderBroker")
    dead = next(b for b in cluster.brokers() if b.address == leader["brokerId"])
    index = next(i for i, b in enumerate(cluster.state.find("broker")) if b.name != dead.name)
    client = cluster.client(index)
    workload = Workload(client, names, rate=120).start()
    acknowledged(workload, 120)
    os.kill(dead.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, now = cluster.admin("GET", "/admin/v2/brokers/leaderBroker", index=index)
        if status == 200 and now["brokerId"] != leader["brokerId"]:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("no new leader within 30 s")
    # the dead broker's bundles find new owners as the clients look them up again
    deadline = time.monotonic() + 30
    while dead.endpoints["service_url"] in bundles_by_owner(cluster, names, index):
        assert time.monotonic() < deadline, "bundles of the dead broker were not placed again"
        time.sleep(1)
    victim = busiest(cluster, names, index, exclude=frozenset({dead.address}))
    overload_and_wait_for_shedding(cluster, names, victim, index)
    acknowledged(workload, 120)
    workload.stop()
    assert not workload.lost, f"{len(workload.lost)} acknowledged messages never received"
    client.close()


# -- topicFencingTimeoutSeconds ----------------------------------------------------------------
def take_over_managed_ledger(cluster: Cluster, topic: str) -> None:
    """Open the topic's managed ledger from this process, as a broker that believes it owns the
    topic would: the real owner's ledger is fenced and it is deposed without being told."""
    import asyncio

    from magnetar.bookie.client import LedgerClient, LedgerClientConfig
    from magnetar.broker.managed_ledger import ManagedLedgerFactory
    from magnetar.broker.topic import TopicName
    from magnetar.common.metadata import open_store

    async def take_over() -> None:
        store = await open_store(f"zk://{cluster.state.zookeeper}/r1")
        ledgers = LedgerClient(store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))
        ledger = await ManagedLedgerFactory(store, ledgers).open(TopicName.parse(topic).managed_ledger_name)
        await ledger.close()
        await ledgers.close()
        await store.close()

    asyncio.run(take_over())


@pytest.mark.parametrize("cluster", [{"topic_fencing_timeout_seconds": 2}], indirect=True)
def test_a_topic_left_fenced_is_recovered(cluster: Cluster) -> None:
    topic = "persistent://public/default/deposed"
    client = cluster.client(0)
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=60_000)
    consumer = client.subscribe(topic, "s")
    producer.send(b"before")
    take_over_managed_ledger(cluster, topic)
    # The deposed owner cannot store these until the fenced topic is closed and opened afresh.
    producer.send(b"after")
    producer.send(b"later")
    received: list[bytes] = []
    while b"later" not in received:
        message = consumer.receive(30_000)
        received.append(message.data())
        consumer.acknowledge(message)
    assert [m for m in received if m != b"before"] == [b"after", b"later"]
    assert b"before" in received
    client.close()


# -- metadata session expiry --------------------------------------------------------------------
def test_an_owner_whose_session_expired_lets_go_and_registers_again(cluster: Cluster) -> None:
    """An owner frozen past its ZooKeeper session (a long GC pause, a stopped VM) loses its
    bundles to another broker while it sleeps; once it wakes it must not go on serving them
    (its consumers would never see what the new owner stores), and it must be listed again."""
    topic = "persistent://public/default/expiring"
    owner_url = owner_of(cluster, topic)
    victim = next(b for b in cluster.brokers() if b.endpoints["service_url"] == owner_url)
    other = next(i for i, b in enumerate(cluster.state.find("broker")) if b.name != victim.name)
    early = cluster.client(other)
    consumer = early.subscribe(topic, "s")
    producer = early.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    first = consumer.receive(10_000)
    assert first.data() == b"before"
    consumer.acknowledge(first)
    time.sleep(1)  # the acknowledgement reaches the cursor
    os.kill(victim.pid, signal.SIGSTOP)
    try:
        # The session (4 s) expires: its registry node goes (and its ownership nodes with it).
        deadline = time.monotonic() + 30
        while victim.address in cluster.admin("GET", "/admin/v2/brokers/r1", index=other)[1]:
            assert time.monotonic() < deadline, "the frozen broker's session did not expire in 30 s"
            time.sleep(0.2)
        late = cluster.client(other)
        late.create_producer(topic, batching_enabled=False).send(b"taken over")  # another broker owns it
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    message = consumer.receive(30_000)
    assert message.data() == b"taken over"
    consumer.acknowledge(message)
    assert owner_of(cluster, topic, other) != owner_url  # asked of a broker that was not frozen
    producer.send(b"from the first producer")
    assert consumer.receive(30_000).data() == b"from the first producer"
    deadline = time.monotonic() + 30
    while victim.address not in cluster.admin("GET", "/admin/v2/brokers/r1", index=other)[1]:
        assert time.monotonic() < deadline, "the broker did not register again after its session expired"
        time.sleep(0.5)
    late.close()
    early.close()


def _lookup_answer(cluster: Cluster, index: int, topic: str, *, authoritative: bool = False) -> str:
    """Broker ``index``'s HTTP lookup of ``topic``, redirects not followed: the broker URL it
    answers, or the web URL it redirects to."""

    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    query = "?authoritative=true" if authoritative else ""
    url = f"{cluster.admin_url(index)}/lookup/v2/topic/{topic.replace('://', '/', 1)}{query}"
    try:
        with urllib.request.build_opener(Keep).open(url, timeout=30) as answer:
            return str(json.loads(answer.read())["brokerUrl"])
    except urllib.error.HTTPError as exc:
        if exc.code != 307:
            raise
        return str(exc.headers["Location"]).split("/lookup/", 1)[0]


#: sessions long enough for a broker to stay registered while it is frozen for a few seconds
PATIENT = {"metadata_store_session_timeout_millis": 20_000}


@pytest.mark.parametrize("cluster", [PATIENT], indirect=True)
def test_a_transfer_lands_on_its_destination_whoever_is_asked_during_the_handover(cluster: Cluster) -> None:
    """Between the source's release and the destination's acquisition nobody owns the bundle. A
    third broker asked then (a client's lookup, a read-only broker's cursor call) must send the
    asker to the destination, not take the bundle itself: the transfer would end as an unload
    with the bundle anywhere. The destination is frozen to hold the handover open."""
    topic = "persistent://public/default/handed-over"
    brokers = cluster.state.find("broker")
    client = cluster.client(0)
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=60_000)
    consumer = client.subscribe(topic, "s")
    producer.send(b"before")
    source = next(i for i, b in enumerate(brokers) if b.endpoints["service_url"] == owner_of(cluster, topic))
    destination, third = (i for i in range(len(brokers)) if i != source)
    bundle = _bundle_of(cluster, topic)
    moved: list[int] = []
    os.kill(brokers[destination].pid, signal.SIGSTOP)
    try:
        path = f"/admin/v2/namespaces/public/default/{bundle}/unload"
        path += f"?destinationBroker={brokers[destination].address}"
        asked = threading.Thread(target=lambda: moved.append(cluster.admin("PUT", path, index=source)[0]))
        asked.start()
        # The source's prepare waits out its 2 s timeout on the frozen destination, then releases.
        deadline = time.monotonic() + 15
        while _lookup_answer(cluster, third, topic) == cluster.admin_url(source):
            assert time.monotonic() < deadline, "the source never released the bundle"
            time.sleep(0.1)
        answers = {
            _lookup_answer(cluster, third, topic),
            _lookup_answer(cluster, third, topic, authoritative=True),
        }
    finally:
        os.kill(brokers[destination].pid, signal.SIGCONT)
    asked.join(60)
    assert answers == {cluster.admin_url(destination)}, "a lookup during the handover named another broker"
    assert moved == [200]
    assert owner_of(cluster, topic, third) == brokers[destination].endpoints["service_url"]
    producer.send(b"after")
    assert [consumer.receive(30_000).data() for _ in range(2)] == [b"before", b"after"]
    client.close()


class PartitionedWorkload:
    """One producer per routing mode on a partitioned topic, keyed messages ``mode:key:seq``, and
    one consumer per subscription type; what the broker acknowledged and what each received."""

    MODES: ClassVar[dict[str, dict[str, Any]]] = {
        "round-robin": {"message_routing_mode": pulsar.PartitionsRoutingMode.RoundRobinDistribution},
        "single": {"message_routing_mode": pulsar.PartitionsRoutingMode.UseSinglePartition},
        "custom": {
            "message_routing_mode": pulsar.PartitionsRoutingMode.CustomPartition,
            "message_router": lambda message, partitions: int(message.partition_key()[1:]) % partitions,
        },
    }
    TYPES: ClassVar[dict[str, Any]] = {
        "shared": pulsar.ConsumerType.Shared,
        "failover": pulsar.ConsumerType.Failover,
        "exclusive": pulsar.ConsumerType.Exclusive,
        "key-shared": pulsar.ConsumerType.KeyShared,
    }

    def __init__(self, client: pulsar.Client, topic: str) -> None:
        self.producers = {
            mode: client.create_producer(topic, batching_enabled=False, send_timeout_millis=60_000, **options)
            for mode, options in self.MODES.items()
        }
        self.consumers = {
            kind: client.subscribe(topic, kind, consumer_type=t) for kind, t in self.TYPES.items()
        }
        self.acked: set[str] = set()
        self.received: dict[str, list[str]] = {kind: [] for kind in self.TYPES}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True)] + [
            threading.Thread(target=self._consume, args=(kind,), daemon=True) for kind in self.TYPES
        ]
        for thread in self._threads:
            thread.start()

    def _produce(self) -> None:
        for sequence in itertools.count():
            if self._stop.is_set():
                return
            for mode, producer in self.producers.items():
                key = f"k{sequence % 16}"
                uid = f"{mode}:{key}:{sequence}"

                def done(result: pulsar.Result, _id: pulsar.MessageId, uid: str = uid) -> None:
                    if result == pulsar.Result.Ok:
                        with self._lock:
                            self.acked.add(uid)

                producer.send_async(uid.encode(), done, partition_key=key)
            time.sleep(0.01)

    def _consume(self, kind: str) -> None:
        consumer = self.consumers[kind]
        while True:
            try:
                message = consumer.receive(500)
            except pulsar.Timeout:
                if self._stop.is_set():
                    with self._lock:
                        if self.acked <= set(self.received[kind]):
                            return
                continue
            with self._lock:
                self.received[kind].append(message.data().decode())
            consumer.acknowledge(message)

    def stop(self) -> None:
        self._stop.set()
        for producer in self.producers.values():
            producer.flush()
        for thread in self._threads:
            thread.join(60)


def _out_of_order(received: list[str]) -> list[str]:
    """Messages of one producer and key that came after a later one (first arrivals only)."""
    last: dict[tuple[str, str], int] = {}
    seen: set[str] = set()
    late = []
    for uid in received:
        if uid in seen:
            continue  # a redelivery after a reconnection
        seen.add(uid)
        mode, key, sequence = uid.split(":")
        if int(sequence) < last.get((mode, key), -1):
            late.append(uid)
        last[(mode, key)] = int(sequence)
    return late


@pytest.mark.parametrize("scheme", ["pulsar", "http"])
def test_a_partitioned_topic_over_three_brokers_keeps_keys_in_order_through_moves(
    shared: Cluster, scheme: str
) -> None:
    topic = f"persistent://public/default/orders-{scheme}"  # each case's own, on the shared cluster
    assert shared.admin("PUT", f"/admin/v2/persistent/public/default/orders-{scheme}/partitions", 8)[0] == 204
    # Consumed data is kept (the namespace's retention), so the readers below see all of it.
    retention = {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}
    assert shared.admin("POST", "/admin/v2/namespaces/public/default/retention", retention)[0] == 204
    partitions = [f"{topic}-partition-{i}" for i in range(8)]
    client = shared.client(0, scheme)
    workload = PartitionedWorkload(client, topic)
    acknowledged(workload, 150)
    owners = {owner_of(shared, p) for p in partitions}
    assert len(owners) >= 2, f"8 partitions all on {owners}"
    # Unload one partition's bundle, then transfer another's to a broker that does not own it.
    moved = _bundle_of(shared, partitions[0])
    assert shared.admin("PUT", f"/admin/v2/namespaces/public/default/{moved}/unload")[0] == 200
    acknowledged(workload, 150)
    target = next(p for p in partitions if _bundle_of(shared, p) != moved)
    owner = owner_of(shared, target)
    destination = next(b for b in shared.brokers() if b.endpoints["service_url"] != owner)
    bundle = _bundle_of(shared, target)
    query = f"?destinationBroker={destination.address}"
    assert shared.admin("PUT", f"/admin/v2/namespaces/public/default/{bundle}/unload{query}")[0] == 200
    acknowledged(workload, 150)
    workload.stop()
    assert owner_of(shared, target) == destination.endpoints["service_url"]
    assert len(workload.acked) > 300
    for kind, received in workload.received.items():
        assert not workload.acked - set(received), f"{kind}: acknowledged messages never received"
        if kind != "shared":  # Shared gives no order; the others keep each key's
            assert not _out_of_order(received), f"{kind}: {_out_of_order(received)[:5]}"
    # A reader per partition sees each partition's messages once, in order, all of them together.
    stored: list[str] = []
    for partition in partitions:
        reader = client.create_reader(partition, pulsar.MessageId.earliest)
        here = []
        while reader.has_message_available():
            here.append(reader.read_next(5000).data().decode())
        assert not _out_of_order(here), partition
        stored += here
        reader.close()
    assert len(stored) == len(set(stored)), "a message was stored twice"
    assert workload.acked <= set(stored)
    client.close()
