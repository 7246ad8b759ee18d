"""Partitioned topics with the official client: created through the admin REST, the
client's partitioned producer routes over every partition, its consumer reads them all, and the
partition count can grow but never shrink."""

from __future__ import annotations

import http.client
import json

import pulsar

from tests.broker.e2e.conftest import Standalone

TOPIC = "persistent://public/default/orders"
PATH = "/admin/v2/persistent/public/default/orders/partitions"


def _call(standalone: Standalone, method: str, path: str, body: object = None) -> tuple[int, object]:
    connection = http.client.HTTPConnection("127.0.0.1", standalone.web_port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        text = response.read()
        return response.status, json.loads(text) if text else None
    finally:
        connection.close()


def test_a_partitioned_topic_spreads_messages_over_its_partitions(standalone: Standalone) -> None:
    assert _call(standalone, "PUT", PATH, 3)[0] == 204
    assert _call(standalone, "GET", PATH) == (200, {"partitions": 3})
    assert _call(standalone, "GET", "/admin/v2/persistent/public/default/partitioned") == (200, [TOPIC])
    client = standalone.client()
    try:
        assert client.get_topic_partitions(TOPIC) == [f"{TOPIC}-partition-{i}" for i in range(3)]
        consumer = client.subscribe(TOPIC, "all")
        producer = client.create_producer(
            TOPIC,
            message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
            batching_enabled=False,
        )
        for i in range(30):
            producer.send(f"m{i}".encode())
        messages = [consumer.receive(timeout_millis=10_000) for _ in range(30)]
        assert sorted(m.data() for m in messages) == sorted(f"m{i}".encode() for i in range(30))
        # each message id names the partition it came from, as the client reports it
        assert {m.topic_name(): m.message_id().partition() for m in messages} == {
            f"{TOPIC}-partition-{i}": i for i in range(3)
        }
        # a reader of one partition reads it to its end and then has nothing more (the last
        # message id names the partition too, as the messages do)
        reader = client.create_reader(f"{TOPIC}-partition-1", pulsar.MessageId.earliest)
        read = []
        while reader.has_message_available():
            read.append(reader.read_next(5000).data())
        assert len(read) == 10
    finally:
        client.close()
    for i in range(3):
        status, stats = _call(
            standalone, "GET", f"/admin/v2/persistent/public/default/orders-partition-{i}/stats"
        )
        assert status == 200
        assert isinstance(stats, dict)
        assert stats["msgInCounter"] > 0, f"partition {i} got no message"


def test_the_partition_count_only_grows_and_bad_counts_are_refused(standalone: Standalone) -> None:
    assert _call(standalone, "PUT", PATH, 2)[0] == 204
    assert _call(standalone, "PUT", PATH, 2)[0] == 409  # exists already
    assert _call(standalone, "POST", PATH, 4)[0] == 204
    assert _call(standalone, "GET", PATH) == (200, {"partitions": 4})
    status, body = _call(standalone, "POST", PATH, 3)
    assert status == 409
    assert "only grow" in str(body)
    for bad in (0, -1, "3", 1.5, None, [2]):
        status, body = _call(standalone, "PUT", "/admin/v2/persistent/public/default/other/partitions", bad)
        assert status in (400, 412), (bad, status, body)
    assert _call(standalone, "PUT", "/admin/v2/persistent/no-such/ns/t/partitions", 2)[0] == 404
    assert _call(standalone, "GET", "/admin/v2/persistent/public/default/plain/partitions") == (
        200,
        {"partitions": 0},
    )
    assert _call(standalone, "DELETE", PATH)[0] == 204
    assert _call(standalone, "GET", PATH) == (200, {"partitions": 0})
    assert "Traceback" not in standalone.log_path.read_text()
