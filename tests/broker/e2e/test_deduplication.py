"""Message deduplication (broker_deduplication_enabled) with the official client: a resent
sequence id is acknowledged but not stored again, also after the broker was killed."""

from __future__ import annotations

import http.client
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


def test_deduplication_is_set_per_namespace_through_the_admin_rest(standalone: Standalone) -> None:
    """Pulsar's ``namespaces set-deduplication``: on a broker without it, one namespace has it."""

    def call(method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", standalone.web_port, timeout=30)
        try:
            connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    assert call("PUT", "/admin/v2/namespaces/public/dedup")[0] == 204
    assert call("GET", "/admin/v2/namespaces/public/dedup/deduplication") == (200, b"null")
    assert call("POST", "/admin/v2/namespaces/public/dedup/deduplication", b"true")[0] == 204
    assert call("GET", "/admin/v2/namespaces/public/dedup/deduplication") == (200, b"true")
    assert call("POST", "/admin/v2/namespaces/public/dedup/deduplication", b'"yes"')[0] == 412
    client = standalone.client()
    for topic, expected in (
        ("persistent://public/dedup/t", [b"0", b"1", b"2"]),  # resends stored once
        ("persistent://public/default/t", [b"0", b"1", b"2", b"again"]),  # the broker's default: off
    ):
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic, producer_name="p1", batching_enabled=False)
        for sequence in range(3):
            producer.send(b"%d" % sequence, sequence_id=sequence)
        producer.send(b"again", sequence_id=2)
        assert drain(consumer) == expected, topic
    client.close()
    # A tenant with namespaces is not deleted; an empty one is.
    assert call("DELETE", "/admin/v2/tenants/public")[0] == 409
    assert call("PUT", "/admin/v2/tenants/empty-tenant", b'{"allowedClusters": ["standalone"]}')[0] == 204
    assert call("DELETE", "/admin/v2/tenants/empty-tenant")[0] == 204
    assert call("GET", "/admin/v2/tenants/empty-tenant")[0] == 404
