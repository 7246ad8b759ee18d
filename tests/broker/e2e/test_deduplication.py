"""Message deduplication (broker_deduplication_enabled) with the official client: a resent
sequence id is acknowledged but not stored again, also after the broker was killed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.broker.e2e.conftest import Standalone

TOPIC = "persistent://public/default/dedup"


@pytest.fixture
def dedup_standalone(tmp_path: Path) -> Iterator[Standalone]:
    server = Standalone(tmp_path / "standalone", broker_deduplication_enabled="true").start()
    yield server
    try:
        server.stop()
    finally:
        server.kill()


def drain(consumer: pulsar.Consumer) -> list[bytes]:
    got = []
    while True:
        try:
            message = consumer.receive(1000)
        except pulsar.Timeout:
            return got
        got.append(message.data())
        consumer.acknowledge(message)


def test_resent_sequence_ids_are_stored_once(dedup_standalone: Standalone) -> None:
    client = dedup_standalone.client()
    consumer = client.subscribe(TOPIC, "s")
    producer = client.create_producer(TOPIC, producer_name="p1", batching_enabled=False)
    for sequence in range(5):
        producer.send(b"%d" % sequence, sequence_id=sequence)
    for sequence in (3, 4):
        producer.send(b"again", sequence_id=sequence)
    producer.send(b"5", sequence_id=5)
    assert drain(consumer) == [b"0", b"1", b"2", b"3", b"4", b"5"]
    client.close()


def test_deduplication_state_survives_a_killed_broker(dedup_standalone: Standalone) -> None:
    client = dedup_standalone.client()
    client.subscribe(TOPIC, "s", initial_position=pulsar.InitialPosition.Earliest).close()
    producer = client.create_producer(TOPIC, producer_name="p1", batching_enabled=False)
    for sequence in range(10):
        producer.send(b"%d" % sequence, sequence_id=sequence)
    client.close()
    dedup_standalone.kill()  # no snapshot at close: the state is rebuilt from the stored entries
    dedup_standalone.start()
    client = dedup_standalone.client()
    producer = client.create_producer(TOPIC, producer_name="p1", batching_enabled=False)
    assert producer.last_sequence_id() == 9
    producer.send(b"duplicate", sequence_id=9)
    producer.send(b"10", sequence_id=10)
    consumer = client.subscribe(TOPIC, "s")
    assert drain(consumer) == [b"%d" % i for i in range(11)]
    client.close()
