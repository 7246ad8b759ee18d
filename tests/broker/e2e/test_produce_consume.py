"""Produce and consume through the official ``pulsar-client`` against ``magnetar standalone``."""

from __future__ import annotations

import re
import time

import pulsar
import pytest

from tests.broker.e2e.conftest import Standalone

TOPIC = "persistent://public/default/"


def receive_all(
    consumer: pulsar.Consumer, count: int, *, ack: bool = True, timeout_ms: int = 10_000
) -> list[bytes]:
    got = []
    for _ in range(count):
        message = consumer.receive(timeout_ms)
        got.append(message.data())
        if ack:
            consumer.acknowledge(message)
    return got


@pytest.mark.slow
def test_100000_batched_messages_arrive_in_order_none_lost(client: pulsar.Client) -> None:
    topic = TOPIC + "bulk"
    consumer = client.subscribe(topic, "bulk", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=5, block_if_queue_full=True)  # fmt: skip
    for i in range(100_000):
        producer.send_async(b"%08d" % i, None)
    producer.flush()
    received = []
    while len(received) < 100_000:
        message = consumer.receive(15_000)
        received.append(int(message.data()))
        consumer.acknowledge_cumulative(message) if len(received) % 1000 == 0 else None
    assert received == list(range(100_000))


def test_exclusive_rejects_a_second_consumer(client: pulsar.Client) -> None:
    topic = TOPIC + "exclusive"
    client.subscribe(topic, "only", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.PulsarException):
        client.subscribe(topic, "only", consumer_type=pulsar.ConsumerType.Exclusive)


def test_shared_spreads_messages_and_delivers_each_once(client: pulsar.Client) -> None:
    topic = TOPIC + "shared"
    consumers = [
        client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10)
        for _ in range(3)
    ]
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(90):
        producer.send(b"%d" % i)
    seen: dict[int, list[int]] = {}
    deadline = time.monotonic() + 20
    while sum(len(v) for v in seen.values()) < 90 and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            try:
                message = consumer.receive(100)
            except pulsar.Timeout:
                continue
            seen.setdefault(index, []).append(int(message.data()))
            consumer.acknowledge(message)
    everything = sorted(v for values in seen.values() for v in values)
    assert everything == list(range(90)), "each message exactly once"
    assert len(seen) == 3, "every consumer got some"


def test_failover_switches_to_the_next_consumer(client: pulsar.Client) -> None:
    topic = TOPIC + "failover"
    first = client.subscribe(topic, "f", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a")
    second = client.subscribe(topic, "f", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b")
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(b"%d" % i)
    assert receive_all(first, 10) == [b"%d" % i for i in range(10)]
    with pytest.raises(pulsar.Timeout):
        second.receive(300)
    first.close()
    for i in range(10, 20):
        producer.send(b"%d" % i)
    assert receive_all(second, 10) == [b"%d" % i for i in range(10, 20)]


def test_key_shared_keeps_per_key_order_as_consumers_join_and_leave(client: pulsar.Client) -> None:
    topic = TOPIC + "keyshared"
    kind = pulsar.ConsumerType.KeyShared
    consumers = [client.subscribe(topic, "k", consumer_type=kind, consumer_name="c0")]
    producer = client.create_producer(topic, batching_enabled=False)
    order: dict[str, list[int]] = {}
    sent = 0

    def drain(rounds: int) -> None:
        for _ in range(rounds):
            for consumer in consumers:
                try:
                    message = consumer.receive(50)
                except pulsar.Timeout:
                    continue
                order.setdefault(message.partition_key(), []).append(int(message.data()))
                consumer.acknowledge(message)

    for phase in range(4):
        for _ in range(100):
            producer.send(b"%d" % sent, partition_key=f"key-{sent % 8}")
            sent += 1
        drain(40)
        if phase == 0:
            consumers.append(client.subscribe(topic, "k", consumer_type=kind, consumer_name="c1"))
        elif phase == 1:
            consumers.append(client.subscribe(topic, "k", consumer_type=kind, consumer_name="c2"))
        elif phase == 2:
            consumers.pop(0).close()
    deadline = time.monotonic() + 20
    while sum(len(v) for v in order.values()) < sent and time.monotonic() < deadline:
        drain(10)
    assert sum(len(v) for v in order.values()) >= sent
    for key, values in order.items():
        deduped = list(dict.fromkeys(values))
        assert deduped == sorted(deduped), f"{key} out of order: {values}"


def test_acknowledged_messages_are_not_redelivered_after_a_restart(standalone: Standalone) -> None:
    topic = TOPIC + "restart-acks"
    client = standalone.client()
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(b"%d" % i)
    for _ in range(12):
        consumer.acknowledge(consumer.receive(5000))
    client.close()
    standalone.restart()
    client = standalone.client()
    consumer = client.subscribe(topic, "s")
    assert receive_all(consumer, 8) == [b"%d" % i for i in range(12, 20)]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)
    client.close()


def test_unacknowledged_messages_are_redelivered(client: pulsar.Client) -> None:
    topic = TOPIC + "redeliver"
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100)  # fmt: skip
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(b"%d" % i)
    first = consumer.receive(5000)
    consumer.negative_acknowledge(first)
    rest = receive_all(consumer, 4)
    again = consumer.receive(5000)
    assert again.data() == first.data()
    assert again.redelivery_count() >= 1
    consumer.acknowledge(again)
    assert sorted([first.data(), *rest]) == [b"%d" % i for i in range(5)]
    # Closing with messages unacknowledged hands them to the next consumer.
    for i in range(5, 8):
        producer.send(b"%d" % i)
    unacked = receive_all(consumer, 3, ack=False)
    consumer.close()
    successor = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    assert receive_all(successor, 3) == unacked


def test_seek_by_message_id_and_by_time(client: pulsar.Client) -> None:
    topic = TOPIC + "seek"
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"%d" % i) for i in range(10)]
    halfway = time.time()
    time.sleep(0.05)
    for i in range(10, 20):
        producer.send(b"%d" % i)
    receive_all(consumer, 20)
    consumer.seek(ids[5])  # the client resumes after the given message
    assert receive_all(consumer, 3) == [b"6", b"7", b"8"]
    consumer.seek(int(halfway * 1000))
    assert consumer.receive(10_000).data() == b"10"


def test_a_reader_seeks_by_time_and_by_id_and_reads_from_there(client: pulsar.Client) -> None:
    topic = TOPIC + "reader-seek"
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"%d" % i) for i in range(5)]
    time.sleep(0.05)
    halfway = int(time.time() * 1000)
    time.sleep(0.05)
    for i in range(5, 10):
        producer.send(b"%d" % i)
    reader = client.create_reader(topic, pulsar.MessageId.latest)
    # The seek closes the reader's consumer and the client subscribes again, without a start
    # message id after a seek by time: the broker keeps the reader's cursor where the seek put it.
    reader.seek(halfway)
    assert [reader.read_next(5000).data() for _ in range(5)] == [b"%d" % i for i in range(5, 10)]
    reader.seek(0)  # the beginning of time
    assert reader.read_next(5000).data() == b"0"
    reader.seek(ids[2])
    assert reader.read_next(5000).data() == b"3"
    producer.send(b"10")  # and the reader goes on with what comes next
    assert [reader.read_next(5000).data() for _ in range(7)] == [b"%d" % i for i in range(4, 11)]


def test_reader_from_earliest_and_from_a_message_id(client: pulsar.Client) -> None:
    topic = TOPIC + "reader"
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"%d" % i) for i in range(10)]
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [reader.read_next(5000).data() for _ in range(10)] == [b"%d" % i for i in range(10)]
    later = client.create_reader(topic, ids[6])
    assert later.read_next(5000).data() == b"7"
    assert later.has_message_available()


def test_producer_reconnects_after_a_broker_restart_without_loss(standalone: Standalone) -> None:
    topic = TOPIC + "reconnect"
    client = standalone.client()
    consumer_client = standalone.client()
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=60_000)
    consumer = consumer_client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    for i in range(10):
        producer.send(b"%d" % i)
    standalone.restart()
    for i in range(10, 20):
        producer.send(b"%d" % i)
    got = receive_all(consumer, 20, timeout_ms=30_000)
    assert sorted(set(got), key=int) == [b"%d" % i for i in range(20)]
    client.close()
    consumer_client.close()


def test_five_megabyte_message(client: pulsar.Client) -> None:
    topic = TOPIC + "big"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=False)
    body = bytes(range(256)) * (5 * 1024 * 1024 // 256 - 64)
    producer.send(body)
    assert consumer.receive(15_000).data() == body


@pytest.mark.parametrize("compression", [pulsar.CompressionType.LZ4, pulsar.CompressionType.ZSTD])
def test_compressed_batches_pass_through(client: pulsar.Client, compression: pulsar.CompressionType) -> None:
    topic = TOPIC + f"compressed-{compression}"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, compression_type=compression, batching_enabled=True,
                                      batching_max_publish_delay_ms=20)  # fmt: skip
    for i in range(200):
        producer.send_async(b"compress me %d " % i * 20, None)
    producer.flush()
    assert receive_all(consumer, 200) == [b"compress me %d " % i * 20 for i in range(200)]


def test_a_reader_from_latest_sees_only_new_messages(client: pulsar.Client) -> None:
    topic = TOPIC + "reader-latest"
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(b"old %d" % i)
    reader = client.create_reader(topic, pulsar.MessageId.latest)
    producer.send(b"new")
    assert reader.read_next(5000).data() == b"new"
    assert not reader.has_message_available()


def test_a_seek_by_one_shared_consumer_restarts_the_others_too(standalone: Standalone) -> None:
    topic = TOPIC + "seek-shared"
    clients = [standalone.client(), standalone.client()]
    kind = pulsar.ConsumerType.Shared
    consumers = [c.subscribe(topic, "s", consumer_type=kind, receiver_queue_size=1) for c in clients]
    producer = clients[0].create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(b"%d" % i)

    def collect(count: int) -> list[list[bytes]]:
        got: list[list[bytes]] = [[], []]
        deadline = time.monotonic() + 20
        while sum(map(len, got)) < count and time.monotonic() < deadline:
            for index, consumer in enumerate(consumers):
                try:
                    message = consumer.receive(100)
                except pulsar.Timeout:
                    continue
                got[index].append(message.data())
                consumer.acknowledge(message)
        return got

    first = collect(10)
    assert sorted(first[0] + first[1]) == sorted(b"%d" % i for i in range(10))
    consumers[0].seek(pulsar.MessageId.earliest)
    again = collect(10)
    assert sorted(again[0] + again[1]) == sorted(b"%d" % i for i in range(10))
    assert again[1], "the other client's consumer is back on the subscription after the seek"
    for client in clients:
        client.close()


def test_a_pattern_subscription_finds_the_namespace_topics(client: pulsar.Client) -> None:
    producers = {
        name: client.create_producer(TOPIC + name, batching_enabled=False)
        for name in ("pattern-a", "pattern-b", "other-c")
    }
    consumer = client.subscribe(re.compile(TOPIC + "pattern-.*"), "s",
                                initial_position=pulsar.InitialPosition.Earliest)  # fmt: skip
    for name, producer in producers.items():
        producer.send(name.encode())
    got = sorted(consumer.receive(10_000).data() for _ in range(2))
    assert got == [b"pattern-a", b"pattern-b"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (pulsar.RegexSubscriptionMode.PersistentOnly, [b"persistent"]),
        (pulsar.RegexSubscriptionMode.NonPersistentOnly, [b"non-persistent"]),
        (pulsar.RegexSubscriptionMode.AllTopics, [b"non-persistent", b"persistent"]),
    ],
)
def test_a_pattern_subscription_takes_the_topics_of_its_mode(
    client: pulsar.Client, mode: pulsar.RegexSubscriptionMode, expected: list[bytes]
) -> None:
    prefix = f"mode-{mode.name.lower()}-"
    producers = [
        client.create_producer(f"{domain}://public/default/{prefix}{domain}", batching_enabled=False)
        for domain in ("persistent", "non-persistent")
    ]
    consumer = client.subscribe(re.compile(f"persistent://public/default/{prefix}.*"), "s",
                                regex_subscription_mode=mode)  # fmt: skip
    for producer, domain in zip(producers, ("persistent", "non-persistent"), strict=True):
        producer.send(domain.encode())
    got = sorted(consumer.receive(10_000).data() for _ in expected)
    assert got == expected
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)


def test_unsubscribe_removes_the_subscription_and_its_backlog(client: pulsar.Client) -> None:
    topic = TOPIC + "unsubscribe"
    shared = pulsar.ConsumerType.Shared
    first = client.subscribe(topic, "s", consumer_type=shared)
    second = client.subscribe(topic, "s", consumer_type=shared)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(b"old %d" % i)
    with pytest.raises(pulsar.PulsarException):
        first.unsubscribe()  # another consumer is still connected
    second.close()
    first.unsubscribe()
    again = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Latest)
    producer.send(b"new")
    assert again.receive(5000).data() == b"new", "the old backlog went with the subscription"


def test_key_shared_sticky_consumers_get_the_keys_of_their_hash_ranges(client: pulsar.Client) -> None:
    topic = TOPIC + "keyshared-sticky"

    def sticky(*ranges: tuple[int, int]) -> pulsar.Consumer:
        policy = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=list(ranges))
        return client.subscribe(topic, "k", consumer_type=pulsar.ConsumerType.KeyShared,
                                key_shared_policy=policy)  # fmt: skip

    consumers = [sticky((0, 32767)), sticky((32768, 65535))]
    with pytest.raises(pulsar.PulsarException):
        sticky((30000, 40000))  # overlaps both
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(200):
        producer.send(b"%d" % i, partition_key=f"key-{i % 20}")
    keys: list[set[str]] = [set(), set()]
    for index, consumer in enumerate(consumers):
        while True:
            try:
                message = consumer.receive(500)
            except pulsar.Timeout:
                break
            keys[index].add(message.partition_key())
            consumer.acknowledge(message)
    assert keys[0] | keys[1] == {f"key-{k}" for k in range(20)}
    assert not keys[0] & keys[1], "each key belongs to one range"
    assert keys[0]
    assert keys[1]
