"""Redelivery as a client sees it: what counts as redelivered, and ack timeouts."""

from __future__ import annotations

from datetime import timedelta

import pulsar
import pytest

TOPIC = "persistent://public/default/"


def test_first_deliveries_of_a_backlog_are_not_counted_as_redeliveries(client: pulsar.Client) -> None:
    """Batches bigger than the receiver queue: entries the broker read ahead but could not send
    yet must arrive with redelivery_count 0 (a dead-letter policy would otherwise fire)."""
    topic = TOPIC + "backlog-redelivery-count"
    client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest).close()
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=50,
                                      batching_max_publish_delay_ms=50)  # fmt: skip
    for i in range(1000):
        producer.send_async(b"%d" % i, None)
    producer.flush()
    consumer = client.subscribe(topic, "s", receiver_queue_size=10)
    counts = []
    for _ in range(1000):
        message = consumer.receive(10_000)
        counts.append(message.redelivery_count())
        consumer.acknowledge(message)
    assert counts == [0] * 1000


@pytest.mark.slow  # the official client's ack timeout cannot be shorter than 10 s
def test_messages_not_acknowledged_within_the_ack_timeout_come_again(client: pulsar.Client) -> None:
    topic = TOPIC + "ack-timeout"
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                unacked_messages_timeout_ms=10_000)  # fmt: skip
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(4):
        producer.send(b"%d" % i)
    first = [consumer.receive(5000) for _ in range(4)]
    consumer.acknowledge(first[0])
    consumer.acknowledge(first[2])
    again = sorted((consumer.receive(30_000) for _ in range(2)), key=lambda m: m.data())
    assert [m.data() for m in again] == [b"1", b"3"]
    assert all(m.redelivery_count() >= 1 for m in again)
    for message in again:
        consumer.acknowledge(message)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(1000)


def test_a_failover_switch_hands_unacknowledged_messages_over(client: pulsar.Client) -> None:
    topic = TOPIC + "failover-unacked"
    first = client.subscribe(topic, "f", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a")
    second = client.subscribe(topic, "f", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b")
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(b"%d" % i)
    received = [first.receive(5000) for _ in range(6)]
    for message in received[:3]:
        first.acknowledge(message)
    first.close()
    handed = [second.receive(10_000) for _ in range(3)]
    assert [m.data() for m in handed] == [b"3", b"4", b"5"]
    assert all(m.redelivery_count() >= 1 for m in handed)


def test_messages_acknowledged_within_a_batch_are_not_redelivered(client: pulsar.Client) -> None:
    topic = TOPIC + "batch-index-ack"
    shared = pulsar.ConsumerType.Shared
    first = client.subscribe(topic, "s", consumer_type=shared, batch_index_ack_enabled=True)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=1000)  # fmt: skip
    for i in range(10):
        producer.send_async(b"%d" % i, None)
    producer.flush()
    for message in [first.receive(5000) for _ in range(10)][:5]:
        first.acknowledge(message)  # half of the one batch
    first.close()
    second = client.subscribe(topic, "s", consumer_type=shared, batch_index_ack_enabled=True)
    again = [second.receive(5000).data() for _ in range(5)]
    assert again == [b"5", b"6", b"7", b"8", b"9"]
    with pytest.raises(pulsar.Timeout):
        second.receive(500)


def test_shared_subscriptions_hold_delayed_messages_until_their_time(client: pulsar.Client) -> None:
    topic = TOPIC + "delayed"
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"later", deliver_after=timedelta(seconds=3))
    producer.send(b"now")
    assert consumer.receive(5000).data() == b"now"
    with pytest.raises(pulsar.Timeout):
        consumer.receive(1000)  # not yet: the delivery time is still seconds away
    assert consumer.receive(10_000).data() == b"later"
