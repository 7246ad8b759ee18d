"""What the official client builds on the broker, end to end: negative acks and the
redelivery count, dead-letter topics, chunked messages larger than the broker's message size
and seek by publish time on a durable consumer. (Shared priority levels, which the Python client
does not offer, and Failover's ACTIVE_CONSUMER_CHANGE are checked over the raw protocol in
test_protocol.py.)"""

from __future__ import annotations

import time

import pulsar

TOPIC = "persistent://public/default/features-"


def test_a_negatively_acknowledged_message_comes_again_with_its_redelivery_count(
    client: pulsar.Client,
) -> None:
    topic = TOPIC + "nack"
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100)  # fmt: skip
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"again")
    producer.send(b"once")
    counts = []
    for _ in range(3):
        message = consumer.receive(10_000)
        while message.data() == b"once":
            consumer.acknowledge(message)
            message = consumer.receive(10_000)
        counts.append(message.redelivery_count())
        consumer.negative_acknowledge(message)
    assert counts == [0, 1, 2]


def test_a_message_goes_to_the_dead_letter_topic_after_its_redeliveries(client: pulsar.Client) -> None:
    topic, dead = TOPIC + "dlq", TOPIC + "dlq-dead"
    dead_consumer = client.subscribe(dead, "inspect", initial_position=pulsar.InitialPosition.Earliest)
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2, dead_letter_topic=dead),
    )
    client.create_producer(topic, batching_enabled=False).send(b"poison")
    deliveries = 0
    while True:
        try:
            message = consumer.receive(3000)
        except pulsar.Timeout:
            break
        deliveries += 1
        consumer.negative_acknowledge(message)
    assert deliveries == 3  # the first delivery and two redeliveries
    assert dead_consumer.receive(10_000).data() == b"poison"


def test_a_ten_megabyte_message_is_chunked_and_reassembled(client: pulsar.Client) -> None:
    topic = TOPIC + "chunks"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
    payload = bytes(range(256)) * (10 * 1024 * 1024 // 256)
    producer.send(payload)
    producer.send(b"after")
    message = consumer.receive(30_000)
    assert message.data() == payload
    consumer.acknowledge(message)
    assert consumer.receive(10_000).data() == b"after"


def test_a_durable_consumer_seeks_by_publish_time(client: pulsar.Client) -> None:
    topic = TOPIC + "seek-time"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(b"%d" % i)
    time.sleep(0.05)
    since = int(time.time() * 1000)
    time.sleep(0.05)
    for i in range(3, 6):
        producer.send(b"%d" % i)
    for _ in range(6):
        consumer.acknowledge(consumer.receive(10_000))
    consumer.seek(since)
    assert [consumer.receive(10_000).data() for _ in range(3)] == [b"3", b"4", b"5"]
