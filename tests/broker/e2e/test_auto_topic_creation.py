"""Auto topic creation: Pulsar's allowAutoTopicCreation, allowAutoTopicCreationType and
defaultNumPartitions, and a namespace's autoTopicCreation override, as the official client sees
them over pulsar:// and http://."""

from __future__ import annotations

from pathlib import Path

import pulsar
import pytest

from tests.broker.conftest import admin_call
from tests.broker.e2e.conftest import Standalone


def _call(standalone: Standalone, method: str, path: str, body: object = None) -> tuple[int, object]:
    return admin_call(method, standalone.web_service_url + path, body)


def _partitions(standalone: Standalone, topic: str) -> int:
    status, body = _call(standalone, "GET", f"/admin/v2/persistent/public/default/{topic}/partitions")
    assert status == 200, body
    assert isinstance(body, dict)
    return int(body["partitions"])


def test_a_namespace_can_make_new_topics_partitioned(standalone: Standalone) -> None:
    rule = {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 4}
    assert _call(standalone, "POST", "/admin/v2/namespaces/public/default/autoTopicCreation", rule)[0] == 204
    assert _call(standalone, "GET", "/admin/v2/namespaces/public/default/autoTopicCreation")[1] == rule
    for url, topic in ((standalone.service_url, "auto-binary"), (standalone.web_service_url, "auto-http")):
        client = pulsar.Client(url, operation_timeout_seconds=15)
        producer = client.create_producer(f"persistent://public/default/{topic}", batching_enabled=False)
        consumer = client.subscribe(f"persistent://public/default/{topic}", "all")
        for i in range(40):
            producer.send(f"m{i}".encode(), partition_key=f"k{i}")
        received = sorted(consumer.receive(10_000).data() for _ in range(40))
        assert received == sorted(f"m{i}".encode() for i in range(40))
        assert _partitions(standalone, topic) == 4, url
        client.close()
    # A topic created through the admin API stays non-partitioned.
    assert _call(standalone, "PUT", "/admin/v2/persistent/public/default/explicit")[0] == 204
    client = standalone.client()
    client.create_producer("persistent://public/default/explicit").send(b"x")
    assert _partitions(standalone, "explicit") == 0
    client.close()


def test_with_auto_creation_off_only_created_topics_are_served(standalone: Standalone) -> None:
    off = {"allowAutoTopicCreation": False}
    assert _call(standalone, "POST", "/admin/v2/namespaces/public/default/autoTopicCreation", off)[0] == 204
    client = standalone.client()
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer("persistent://public/default/never-created")
    with pytest.raises(pulsar.TopicNotFound):
        client.subscribe("persistent://public/default/never-created", "s")
    assert _call(standalone, "PUT", "/admin/v2/persistent/public/default/created")[0] == 204
    client.create_producer("persistent://public/default/created").send(b"taken")
    assert _call(standalone, "PUT", "/admin/v2/persistent/public/default/parted/partitions", 2)[0] == 204
    client.create_producer("persistent://public/default/parted").send(b"taken too")
    assert _call(standalone, "DELETE", "/admin/v2/namespaces/public/default/autoTopicCreation")[0] == 204
    client.create_producer("persistent://public/default/now-allowed").send(b"back to the broker's rule")
    client.close()


def test_bad_overrides_are_refused(standalone: Standalone) -> None:
    path = "/admin/v2/namespaces/public/default/autoTopicCreation"
    for bad in (
        {"allowAutoTopicCreation": "maybe"},
        {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 0},
        {"allowAutoTopicCreation": True, "topicType": "sharded"},
    ):
        status, body = _call(standalone, "POST", path, bad)
        assert status == 412, (bad, body)
    assert _call(standalone, "POST", path, [1])[0] == 400


def test_the_broker_default_can_be_partitioned(tmp_path: Path) -> None:
    server = Standalone(
        tmp_path / "standalone", allow_auto_topic_creation_type="partitioned", default_num_partitions=3
    ).start()
    try:
        client = server.client()
        client.create_producer("persistent://public/default/by-default").send(b"x")
        assert _partitions(server, "by-default") == 3
        client.close()
    finally:
        server.stop()
        server.kill()
