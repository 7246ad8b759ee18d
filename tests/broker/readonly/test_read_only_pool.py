"""The read-only broker pool (PIP-63) with real processes: one writable broker, two read-only
brokers, two bookies, a real ZooKeeper. Producers use the writable broker, consumers the
read-only pool's service URL; every client is the official ``pulsar-client``."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pulsar
import pytest

from magnetar.local.spec import LedgerSpec, RegionSpec

if TYPE_CHECKING:
    from ..conftest import LocalCluster

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


@pytest.fixture(scope="module")
def pool(local_cluster: Callable[[RegionSpec], LocalCluster]) -> LocalCluster:
    return local_cluster(
        RegionSpec(
            name="r1",
            bookies=2,
            brokers=1,
            read_only_brokers=2,
            ledger=LedgerSpec(ensemble_size=2, write_quorum=2, ack_quorum=2),
            bookie_settings={"zk_timeout": 4000},
            broker_settings={
                "metadata_store_session_timeout_millis": 4000,
                # the writable owner makes its last entry visible to tailing readers when idle
                "bookkeeper_explicit_lac_interval_in_mills": 50,
                "read_only_metadata_poll_interval_millis": 300,
                # small ledgers: the tests see rolls
                "managed_ledger_max_entries_per_ledger": 150,
                "managed_ledger_min_ledger_rollover_time_minutes": 0,
            },
        )
    )


def pool_url(cluster: LocalCluster) -> str:
    """The read-only pool's service URL: every read-only broker (the client tries each)."""
    hosts = [b.endpoints["service_url"].removeprefix("pulsar://") for b in cluster.brokers(read_only=True)]
    return "pulsar://" + ",".join(hosts)


@pytest.fixture
def clients(pool: LocalCluster) -> Iterator[tuple[pulsar.Client, pulsar.Client]]:
    """(a client of the writable broker, a client of the read-only pool)."""
    writable, read_only = pool.client(pool.service_url()), pool.client(pool_url(pool))
    yield writable, read_only
    writable.close()
    read_only.close()


def test_producer_on_the_read_only_pool_is_refused_naming_the_writable_url(pool: LocalCluster) -> None:
    # In a process of its own: the client library takes its logger from the first client a
    # process creates, and the refusal's text reaches the application only through that log.
    script = textwrap.dedent(
        """
        import sys
        import pulsar
        log = pulsar.ConsoleLogger(pulsar.LoggerLevel.Info)  # to stdout
        client = pulsar.Client(sys.argv[1], operation_timeout_seconds=10, logger=log)
        try:
            client.create_producer("persistent://public/default/ro-refused")
        except pulsar.NotAllowedError:
            print("refused: NotAllowedError")
        client.close()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, pool.service_url(read_only=True)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "refused: NotAllowedError" in result.stdout, result.stdout + result.stderr
    refusal = [line for line in result.stdout.splitlines() if "read-only" in line]
    assert any(pool.service_url() in line for line in refusal), result.stdout


def test_consuming_through_the_pool_while_producing_loses_nothing_and_keeps_order(
    pool: LocalCluster, clients: tuple[pulsar.Client, pulsar.Client]
) -> None:
    writable, read_only = clients
    topic = "persistent://public/default/ro-stream"
    consumer = read_only.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Failover)
    producer = writable.create_producer(topic, batching_enabled=False)
    total = 600
    sent: list[str] = []

    def produce() -> None:
        for i in range(total):
            producer.send(str(i).encode())
            sent.append(str(i))
            if i % 100 == 99:
                time.sleep(0.5)  # pauses: the last entry before each must still arrive

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    received: list[str] = []
    ledgers: set[int] = set()
    while len(received) < total:
        message = consumer.receive(20_000)
        received.append(message.data().decode())
        ledgers.add(message.message_id().ledger_id())
        consumer.acknowledge(message)
    thread.join()
    assert received == sent, "every message, in the order produced"
    assert len(ledgers) >= 3, f"ledger rolls followed by the read-only owner: {sorted(ledgers)}"
    # Served by the read-only pool, not redirected to the writable broker.
    _, found = pool.admin("GET", "/lookup/v2/topic/persistent/public/default/ro-stream", read_only=True)
    assert found["brokerUrl"] in {b.endpoints["service_url"] for b in pool.brokers(read_only=True)}


def test_an_ack_on_the_read_only_side_moves_the_writable_cursor(
    clients: tuple[pulsar.Client, pulsar.Client],
) -> None:
    writable, read_only = clients
    topic = "persistent://public/default/ro-acks"
    consumer = read_only.subscribe(topic, "shared-cursor", initial_position=pulsar.InitialPosition.Earliest)
    producer = writable.create_producer(topic, batching_enabled=False)
    for i in range(100):
        producer.send(str(i).encode())
    for expected in range(60):
        message = consumer.receive(20_000)
        assert message.data().decode() == str(expected)
        consumer.acknowledge(message)
    consumer.close()
    # The same subscription on the writable broker: what was acked on the read-only side is
    # not delivered again; the rest is.
    again = writable.subscribe(topic, "shared-cursor")
    rest = [again.receive(20_000).data().decode() for _ in range(40)]
    assert rest == [str(i) for i in range(60, 100)]
    with pytest.raises(pulsar.Timeout):
        again.receive(1000)
    again.close()


def test_a_writable_owner_unload_is_followed_by_the_read_only_owner(
    pool: LocalCluster, clients: tuple[pulsar.Client, pulsar.Client]
) -> None:
    writable, read_only = clients
    topic = "persistent://public/default/ro-follow"
    consumer = read_only.subscribe(topic, "f", consumer_type=pulsar.ConsumerType.Failover)
    producer = writable.create_producer(topic, batching_enabled=False, send_timeout_millis=60_000)
    sent = [str(i) for i in range(400)]
    received: list[str] = []
    for uid in sent[:200]:
        producer.send(uid.encode())
    while len(received) < 100:
        message = consumer.receive(20_000)
        received.append(message.data().decode())
        consumer.acknowledge(message)
    # The writable owner lets the bundle go (it closes the ledger; the next owner starts another):
    # the read-only owner follows to the new ledger and its cursor updates reach the new owner.
    status, _ = pool.admin("PUT", f"/admin/v2/namespaces/public/default/{bundle_of(topic)}/unload")
    assert status in (200, 204)
    for uid in sent[200:]:
        producer.send(uid.encode())
    while len(received) < len(sent):
        message = consumer.receive(20_000)
        received.append(message.data().decode())
        consumer.acknowledge(message)
    assert received == sent
    consumer.close()
    # The acks made through the read-only owner reach the writable owner after the move: its
    # cursor says nothing is left (acks travel on after the client's close; on a busy machine
    # that takes a moment), and the subscription opened there gets nothing again.
    path = f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/stats"
    deadline = time.monotonic() + 30
    while (
        backlog := pool.admin("GET", path)[1]["subscriptions"]["f"]["msgBacklog"]
    ) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert backlog == 0, f"{backlog} messages acknowledged through the read-only owner are not acknowledged"
    again = writable.subscribe(topic, "f")
    with pytest.raises(pulsar.Timeout):
        again.receive(2000)
    again.close()


def _until(condition: Callable[[], bool], lock: threading.Lock, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with lock:
            if condition():
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened within {timeout_s:.0f} s: {what}")
        time.sleep(0.1)


def bundle_of(topic: str) -> str:
    from magnetar.broker.namespace import DEFAULT_BUNDLES, Bundle, even_boundaries, topic_hash

    edges = even_boundaries(DEFAULT_BUNDLES)
    value = topic_hash(topic)
    start, end = next((a, b) for a, b in itertools.pairwise(edges) if a <= value < b)
    return Bundle(start, end).name


def test_kill_9_of_a_read_only_broker_under_load_loses_nothing(
    pool: LocalCluster, clients: tuple[pulsar.Client, pulsar.Client]
) -> None:
    writable, read_only = clients
    topic = "persistent://public/default/ro-kill"
    consumer = read_only.subscribe(topic, "k", consumer_type=pulsar.ConsumerType.Shared)
    producer = writable.create_producer(topic, batching_enabled=False, send_timeout_millis=60_000)
    acked: set[str] = set()
    received: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()  # the producer's
    drained = threading.Event()  # the consumer's: it may be reconnecting long after the producer stops

    def produce() -> None:
        sequence = 0
        while not stop.is_set():
            uid = str(sequence)

            def done(result: pulsar.Result, _id: pulsar.MessageId, uid: str = uid) -> None:
                if result == pulsar.Result.Ok:
                    with lock:
                        acked.add(uid)

            producer.send_async(uid.encode(), done)
            sequence += 1
            time.sleep(1 / 300)

    def consume() -> None:
        while True:
            try:
                message = consumer.receive(500)
            except pulsar.Timeout:
                if drained.is_set():
                    return
                continue
            with lock:
                received.add(message.data().decode())
            with contextlib.suppress(pulsar.PulsarException):
                # An ack that cannot go out while the client reconnects is lost: the message is
                # delivered again, which this test allows (it checks loss, not duplicates).
                consumer.acknowledge(message)

    threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=consume, daemon=True)]
    for thread in threads:
        thread.start()
    # load before the kill, and after it the other read-only broker delivering what was sent since
    # (the victim's session expired, the bundle taken): events, not a clock, so a slow machine
    # only takes longer
    _until(lambda: len(acked) >= 500 and len(received) > 0, lock, "500 acknowledged, some received", 60)
    _, found = pool.admin("GET", "/lookup/v2/topic/persistent/public/default/ro-kill", read_only=True)
    victim = next(b for b in pool.brokers(read_only=True) if b.endpoints["service_url"] == found["brokerUrl"])
    with lock:
        sent_before_kill = max(int(uid) for uid in acked)
    os.kill(victim.pid, signal.SIGKILL)
    _until(
        lambda: sum(int(uid) > sent_before_kill for uid in received) >= 1000,
        lock,
        "1,000 messages sent after the kill received through the other read-only broker",
        90,
    )
    stop.set()
    producer.flush()
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        with lock:
            if acked <= received:
                break
        time.sleep(0.2)
    drained.set()
    threads[1].join(5)
    with lock:
        lost = acked - received
    assert len(acked) > 1500
    assert not lost, f"{len(lost)} acknowledged messages never received"
