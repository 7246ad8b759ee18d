"""Non-persistent topics with the official client: messages reach the consumers
connected when they are published, every subscription type works, a consumer that cannot keep up
loses messages and the drops are counted, nothing is kept across an unload or a restart, and what
only a stored topic can do is refused with the reason."""

from __future__ import annotations

import time
from pathlib import Path

import pulsar
import pytest
from click.testing import CliRunner

from magnetar.admin.cli import admin
from tests.broker.conftest import admin_call, send_until_received
from tests.broker.e2e.conftest import Standalone

TOPIC = "non-persistent://public/default/np-"


def _stats(standalone: Standalone, local: str) -> dict[str, object]:
    status, stats = admin_call(
        "GET", f"{standalone.web_service_url}/admin/v2/non-persistent/public/default/{local}/stats"
    )
    assert status == 200, stats
    assert isinstance(stats, dict)
    return stats


def _receive_until_quiet(consumer: pulsar.Consumer, quiet_ms: int = 1000) -> list[bytes]:
    got = []
    while True:
        try:
            message = consumer.receive(quiet_ms)
        except pulsar.Timeout:
            return got
        got.append(message.data())
        consumer.acknowledge(message)


def test_a_subscriber_receives_only_what_is_published_after_it_subscribed(client: pulsar.Client) -> None:
    producer = client.create_producer(TOPIC + "late", batching_enabled=False)
    for i in range(5):
        producer.send(b"before %d" % i)
    consumer = client.subscribe(TOPIC + "late", "s", initial_position=pulsar.InitialPosition.Earliest)
    reader = client.create_reader(TOPIC + "late", pulsar.MessageId.earliest)
    for i in range(5):
        producer.send(b"after %d" % i)
    expected = [b"after %d" % i for i in range(5)]
    assert _receive_until_quiet(consumer) == expected, "nothing published before the subscription is kept"
    assert [reader.read_next(5000).data() for _ in range(5)] == expected
    assert not reader.has_message_available()


@pytest.mark.parametrize("sub_type", ["Exclusive", "Failover", "Shared", "Key_Shared"])
def test_every_subscription_type_delivers_each_message_once(client: pulsar.Client, sub_type: str) -> None:
    topic = TOPIC + "types-" + sub_type.lower()
    kind = getattr(pulsar.ConsumerType, "KeyShared" if sub_type == "Key_Shared" else sub_type)
    consumers = [client.subscribe(topic, "s", consumer_type=kind)]
    if sub_type in ("Failover", "Shared", "Key_Shared"):
        consumers.append(client.subscribe(topic, "s", consumer_type=kind))
    producer = client.create_producer(topic, batching_enabled=False)
    sent = [b"%03d" % i for i in range(100)]
    for i, value in enumerate(sent):
        producer.send(value, partition_key=f"key-{i % 7}")
    per_consumer = [_receive_until_quiet(c) for c in consumers]
    got = sorted(m for received in per_consumer for m in received)
    assert got == sent, "each message once, none lost with consumers keeping up"
    for received in per_consumer:
        assert received == sorted(received), "each consumer gets its messages in order"


def test_a_consumer_that_cannot_keep_up_loses_messages_and_the_drops_are_counted(
    standalone: Standalone, client: pulsar.Client
) -> None:
    topic = TOPIC + "slow"
    slow = client.subscribe(topic, "slow", receiver_queue_size=10)
    fast = client.subscribe(topic, "fast")
    producer = client.create_producer(topic, batching_enabled=False)
    sent = [b"%03d" % i for i in range(200)]
    for value in sent:
        producer.send(value)  # the producer is never held up by the slow subscription
    assert _receive_until_quiet(fast) == sent
    received = _receive_until_quiet(slow)
    stats = _stats(standalone, "np-slow")
    subscriptions = stats["subscriptions"]
    assert isinstance(subscriptions, dict)
    dropped = subscriptions["slow"]["msgDropCounter"]
    assert subscriptions["fast"]["msgDropCounter"] == 0
    assert dropped >= 150, f"the slow consumer had permits for about 10 messages, got {len(received)}"
    assert len(received) + dropped == len(sent), "every message is either received or counted as dropped"
    assert received == sorted(received)
    assert stats["msgDropCounter"] == dropped
    assert stats["storageSize"] == 0, "nothing is held once every subscription dispatched or dropped it"


def test_nothing_is_kept_across_an_unload_or_a_restart(standalone: Standalone) -> None:
    client = standalone.client()
    topic = TOPIC + "restart"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"first")
    assert consumer.receive(5000).data() == b"first"
    status, body = admin_call(
        "PUT", f"{standalone.web_service_url}/admin/v2/non-persistent/public/default/np-restart/unload"
    )
    assert status == 204, body
    send_until_received(producer, consumer, b"after the unload", timeout_s=15)  # both reconnected
    client.close()

    standalone.restart()
    client = standalone.client()
    again = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    with pytest.raises(pulsar.Timeout):
        again.receive(1000)
    client.create_producer(topic).send(b"new")
    assert again.receive(5000).data() == b"new"
    status, listed = admin_call("GET", f"{standalone.web_service_url}/admin/v2/non-persistent/public/default")
    assert status == 200
    assert f"{TOPIC}restart" in listed
    status, listed = admin_call("GET", f"{standalone.web_service_url}/admin/v2/persistent/public/default")
    assert status == 200
    assert not [t for t in listed if "np-restart" in t], "nothing of it is stored"
    base = ["--admin-url", standalone.web_service_url, "topics"]
    listed_by_cli = CliRunner().invoke(admin, [*base, "list", "public/default"]).output.split()
    assert f"{TOPIC}restart" in listed_by_cli
    stats = CliRunner().invoke(admin, [*base, "stats", f"{TOPIC}restart"])
    assert stats.exit_code == 0, stats.output
    assert '"msgDropCounter"' in stats.output
    client.close()


def test_what_needs_storage_is_refused_with_the_reason(standalone: Standalone, client: pulsar.Client) -> None:
    topic = TOPIC + "refused"
    client.create_producer(topic).send(b"x")
    with pytest.raises(pulsar.NotAllowedError):
        client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    base = f"{standalone.web_service_url}/admin/v2/non-persistent/public/default/np-refused"
    status, body = admin_call("PUT", f"{base}/compaction")
    assert status == 405
    assert "only persistent topics can be compacted" in body["reason"]
    status, body = admin_call("POST", f"{base}/terminate")
    assert status == 405
    assert "cannot be terminated" in body["reason"]
    client.create_producer(topic).send(b"still served")


def test_a_broker_with_non_persistent_topics_disabled_refuses_them(tmp_path: Path) -> None:
    server = Standalone(tmp_path / "off", enable_non_persistent_topics="false").start()
    try:
        client = server.client()
        with pytest.raises(pulsar.NotAllowedError):
            client.create_producer(TOPIC + "off")
        with pytest.raises(pulsar.NotAllowedError):
            client.subscribe(TOPIC + "off", "s")
        client.create_producer("persistent://public/default/np-off").send(b"persistent ones work")
        client.close()
    finally:
        server.stop()
        server.kill()


def test_a_namespace_without_auto_creation_refuses_an_unknown_non_persistent_topic(
    standalone: Standalone, client: pulsar.Client
) -> None:
    status, body = admin_call(
        "POST",
        f"{standalone.web_service_url}/admin/v2/namespaces/public/default/autoTopicCreation",
        {"allowAutoTopicCreation": False},
    )
    assert status == 204, body
    deadline = time.monotonic() + 10
    while True:  # the policy reaches the broker's cache within moments
        try:
            client.create_producer(TOPIC + f"unknown-{time.monotonic_ns()}").close()
        except pulsar.TopicNotFound:
            break
        assert time.monotonic() < deadline, "auto creation stayed on"
        time.sleep(0.2)
    made = f"{standalone.web_service_url}/admin/v2/non-persistent/public/default/np-made"
    status, body = admin_call("PUT", made)
    assert status == 204, body
    client.create_producer(TOPIC + "made").send(b"created through the admin API")
