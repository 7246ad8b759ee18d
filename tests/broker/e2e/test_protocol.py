"""The handshake, keep-alive and request/response rules of the binary protocol, over a raw
socket where the official client hides them, plus the broker's /metrics."""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from magnetar.broker.protocol import commands
from magnetar.broker.protocol.frames import payload_section
from magnetar.proto import PulsarApi_pb2 as api
from tests.broker.e2e.conftest import Standalone
from tests.broker.e2e.test_malformed import RawConnection
from tests.metrics import histogram, scrape

T = commands.T
TOPIC = "persistent://public/default/protocol"


@pytest.fixture
def quick_keepalive(tmp_path: Path) -> Iterator[Standalone]:
    server = Standalone(tmp_path / "standalone", keep_alive_interval_seconds=1).start()
    yield server
    try:
        server.stop()
    finally:
        server.kill()


def test_the_protocol_version_is_the_lower_of_both_and_limits_are_announced(standalone: Standalone) -> None:
    for theirs, agreed in ((6, 6), (21, 21), (99, 21)):
        raw = RawConnection(standalone)
        raw.send(commands.command(T.CONNECT, "connect", client_version="raw", protocol_version=theirs))
        reply = raw.receive()
        assert reply is not None
        assert reply.type == T.CONNECTED
        assert reply.connected.protocol_version == agreed
        assert reply.connected.max_message_size == 5 * 1024 * 1024
    raw.send(commands.command(T.CONNECT, "connect", client_version="raw", protocol_version=21))
    again = raw.receive()
    assert again is not None
    assert again.type == T.ERROR
    assert "already connected" in again.error.message


def test_a_silent_client_is_pinged_then_dropped(quick_keepalive: Standalone) -> None:
    raw = RawConnection(quick_keepalive)
    raw.connect()
    ping = raw.receive()
    assert ping is not None
    assert ping.type == T.PING
    raw.send(commands.pong())  # alive: the connection stays
    assert raw.receive().type == T.PING  # type: ignore[union-attr]
    assert raw.closed_after(), "no answer to the pings: the broker closes the connection"
    mute = RawConnection(quick_keepalive)
    assert mute.closed_after(), "no CONNECT: the broker closes the connection"


def test_requests_for_unknown_producers_and_consumers_are_answered(standalone: Standalone) -> None:
    raw = RawConnection(standalone)
    raw.connect()
    section = payload_section(api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1), b"x")
    raw.send(commands.command(T.SEND, "send", producer_id=7, sequence_id=0), section)
    reply = raw.receive()
    assert reply is not None
    assert reply.type == T.SEND_ERROR
    assert "no producer 7" in reply.send_error.message
    raw.send(commands.command(T.SEEK, "seek", consumer_id=3, request_id=11, message_publish_time=1))
    reply = raw.receive()
    assert reply is not None
    assert reply.type == T.ERROR
    assert reply.error.request_id == 11
    assert reply.error.error == api.ConsumerNotFound


def test_acks_with_a_request_id_get_a_receipt(standalone: Standalone) -> None:
    raw = RawConnection(standalone)
    raw.connect()
    raw.send(commands.command(T.LOOKUP, "lookupTopic", topic=TOPIC, request_id=9))  # owns the bundle
    assert raw.receive().lookupTopicResponse.response == api.CommandLookupTopicResponse.Connect  # type: ignore[union-attr]
    raw.send(commands.command(T.SUBSCRIBE, "subscribe", topic=TOPIC, subscription="s", consumer_id=1,
                              request_id=1, subType=api.CommandSubscribe.Exclusive))  # fmt: skip
    assert raw.receive().type == T.SUCCESS  # type: ignore[union-attr]
    raw.send(commands.command(T.PRODUCER, "producer", topic=TOPIC, producer_id=1, request_id=2))
    assert raw.receive().type == T.PRODUCER_SUCCESS  # type: ignore[union-attr]
    section = payload_section(api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1), b"x")
    raw.send(commands.command(T.SEND, "send", producer_id=1, sequence_id=0), section)
    receipt = raw.receive()
    assert receipt is not None
    assert receipt.type == T.SEND_RECEIPT
    raw.send(commands.command(T.FLOW, "flow", consumer_id=1, messagePermits=10))
    message = raw.receive()
    assert message is not None
    assert message.type == T.MESSAGE
    assert message.message.message_id.entryId == receipt.send_receipt.message_id.entryId
    ack = commands.command(T.ACK, "ack", consumer_id=1, ack_type=api.CommandAck.Individual, request_id=5)
    ack.ack.message_id.add().CopyFrom(message.message.message_id)
    raw.send(ack)
    response = raw.receive()
    assert response is not None
    assert response.type == T.ACK_RESPONSE
    assert response.ackResponse.request_id == 5
    assert not response.ackResponse.HasField("error")


def metric(text: str, name: str, topic: str) -> float:
    match = re.search(rf'^{name}{{[^}}]*topic="{re.escape(topic)}"[^}}]*}} (\S+)$', text, re.M)
    assert match is not None, f"{name} for {topic} missing"
    return float(match.group(1))


def test_status_html_answers_ok_as_pulsars_does(standalone: Standalone) -> None:
    """Pulsar's health page, which the operator's broker pods are probed by (no token needed)."""
    with urllib.request.urlopen(f"{standalone.web_service_url}/status.html", timeout=10) as response:
        assert (response.status, response.read()) == (200, b"OK")


def test_metrics_report_backlog_storage_producers_and_subscriptions(standalone: Standalone) -> None:
    topic = TOPIC + "-metrics"
    client = standalone.client()
    consumer = client.subscribe(topic, "idle")
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(b"%d" % i)

    def scrape() -> str:
        with urllib.request.urlopen(f"{standalone.web_service_url}/metrics", timeout=10) as response:
            return str(response.read().decode())

    text = scrape()
    assert metric(text, "pulsar_msg_backlog", topic) == 10
    assert metric(text, "pulsar_storage_size", topic) > 0
    assert metric(text, "pulsar_producers_count", topic) == 1
    assert metric(text, "pulsar_subscriptions_count", topic) == 1
    assert metric(text, "pulsar_consumers_count", topic) == 1
    assert metric(text, "pulsar_in_messages_total", topic) == 10
    for _ in range(10):
        consumer.acknowledge(consumer.receive(5000))
    producer.close()
    deadline = time.monotonic() + 10  # the client sends its acks in groups, every 100 ms
    while metric(text := scrape(), "pulsar_msg_backlog", topic) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert metric(text, "pulsar_msg_backlog", topic) == 0
    assert metric(text, "pulsar_out_messages_total", topic) == 10
    assert metric(text, "pulsar_producers_count", topic) == 0
    assert metric(text, "pulsar_rate_in", topic) >= 0, "a producer leaving never makes a rate negative"
    client.close()


def test_a_stopped_event_loop_shows_as_lag_on_the_metrics_page(standalone: Standalone) -> None:
    """The broker's /metrics shows its event loop's lateness: a process stopped for 0.4 s (as a
    long GC pause or a blocking call would stop its loop) adds a sample late by over 0.2 s."""
    url = f"{standalone.web_service_url}/metrics"
    name = "magnetar_event_loop_lag_seconds"
    before = histogram(scrape(url), name)
    os.kill(standalone.pid, signal.SIGSTOP)
    try:
        time.sleep(0.4)  # the stall under test
    finally:
        os.kill(standalone.pid, signal.SIGCONT)
    late = histogram(scrape(url), name).since(before)
    bounds = [float(le) for le in re.findall(rf'^{name}_bucket{{le="([^"+]+)"}}', scrape(url), re.M)]
    over_0_2_s = late.count - late.buckets[bounds.index(0.2)]
    assert over_0_2_s >= 1, f"no heartbeat later than 0.2 s after a 0.4 s stop: {late}"
    assert 'magnetar_gc_pause_seconds_count{generation="0"}' in scrape(url)


def test_failover_consumers_hear_which_one_is_active(standalone: Standalone) -> None:
    topic = TOPIC + "-failover"
    raw = RawConnection(standalone)
    raw.connect()
    raw.send(commands.command(T.LOOKUP, "lookupTopic", topic=topic, request_id=9))
    assert raw.receive().type == T.LOOKUP_RESPONSE  # type: ignore[union-attr]

    def subscribe(consumer_id: int, name: str) -> None:
        raw.send(commands.command(T.SUBSCRIBE, "subscribe", topic=topic, subscription="f",
                                  consumer_id=consumer_id, request_id=consumer_id, consumer_name=name,
                                  subType=api.CommandSubscribe.Failover))  # fmt: skip
        assert raw.receive().type == T.SUCCESS  # type: ignore[union-attr]

    def changes(count: int) -> dict[int, bool]:
        found = {}
        for _ in range(count):
            reply = raw.receive()
            assert reply is not None
            assert reply.type == T.ACTIVE_CONSUMER_CHANGE
            found[reply.active_consumer_change.consumer_id] = reply.active_consumer_change.is_active
        return found

    subscribe(1, "a")
    assert changes(1) == {1: True}
    subscribe(2, "b")
    assert changes(1) == {2: False}  # "a" stays active; only the newcomer is told
    raw.send(commands.command(T.CLOSE_CONSUMER, "close_consumer", consumer_id=1, request_id=20))
    replies = [raw.receive(), raw.receive()]
    assert {r.type for r in replies if r is not None} == {T.SUCCESS, T.ACTIVE_CONSUMER_CHANGE}
    change = next(r for r in replies if r is not None and r.type == T.ACTIVE_CONSUMER_CHANGE)
    assert change.active_consumer_change.consumer_id == 2
    assert change.active_consumer_change.is_active


def test_shared_consumers_of_a_higher_priority_level_are_served_first(standalone: Standalone) -> None:
    topic = TOPIC + "-priority"
    raw = RawConnection(standalone)
    raw.connect()
    raw.send(commands.command(T.LOOKUP, "lookupTopic", topic=topic, request_id=9))  # takes the bundle
    assert raw.receive().type == T.LOOKUP_RESPONSE  # type: ignore[union-attr]
    for consumer_id, priority in ((1, 1), (2, 0)):  # the low one subscribes first
        raw.send(commands.command(T.SUBSCRIBE, "subscribe", topic=topic, subscription="p",
                                  consumer_id=consumer_id, request_id=consumer_id, priority_level=priority,
                                  subType=api.CommandSubscribe.Shared))  # fmt: skip
        assert raw.receive().type == T.SUCCESS  # type: ignore[union-attr]
    raw.send(commands.command(T.FLOW, "flow", consumer_id=1, messagePermits=100))
    raw.send(commands.command(T.FLOW, "flow", consumer_id=2, messagePermits=5))
    # A request after the FLOWs: its answer means the broker has taken them (commands of a
    # connection are handled in order).
    raw.send(commands.command(T.CONSUMER_STATS, "consumerStats", consumer_id=2, request_id=30))
    stats = raw.receive()
    assert stats is not None
    assert stats.consumerStatsResponse.availablePermits == 5
    client = standalone.client()
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(8):
        producer.send(b"%d" % i)
    client.close()
    receivers = []
    for _ in range(8):
        reply = raw.receive()
        assert reply is not None
        assert reply.type == T.MESSAGE
        receivers.append(reply.message.consumer_id)
    # priority 0 while it has permits, then the next level
    assert receivers == [2] * 5 + [1] * 3


def test_metrics_take_a_publish_apart_into_broker_and_storage_latency(standalone: Standalone) -> None:
    url = f"{standalone.web_service_url}/metrics"
    names = ("pulsar_broker_publish_latency_seconds", "pulsar_storage_write_latency_seconds")
    before = {n: histogram(scrape(url), n).count for n in names}
    client = standalone.client()
    producer = client.create_producer(TOPIC + "-latency", batching_enabled=False)
    for i in range(20):
        producer.send(b"%d" % i)
    client.close()
    text = scrape(url)
    publish, storage = (histogram(text, n) for n in names)
    for name, found in zip(names, (publish, storage), strict=True):
        assert found.count - before[name] >= 20, name  # every send observed
        assert found.buckets == sorted(found.buckets), name  # cumulative
        assert found.buckets[-1] == found.count, name  # +Inf holds them all
        assert found.sum > 0, name
    # A publish waits for its storage write: the broker's time is never the smaller of the two.
    assert publish.mean >= storage.mean


def test_with_topic_level_metrics_off_the_metrics_page_has_a_line_per_namespace(tmp_path: Path) -> None:
    """exposeTopicLevelMetricsInPrometheus=false: a namespace's topics summed, no topic label."""
    server = Standalone(tmp_path / "standalone", expose_topic_level_metrics_in_prometheus="false").start()
    try:
        client = server.client()
        topics = [f"persistent://public/default/by-namespace-{i}" for i in range(3)]
        consumers = [client.subscribe(topic, "idle") for topic in topics]
        for count, topic in enumerate(topics, 1):
            producer = client.create_producer(topic, batching_enabled=False)
            for i in range(count):
                producer.send(b"%d" % i)
            producer.close()
        text = scrape(f"{server.web_service_url}/metrics")
        backlog = [line for line in text.splitlines() if line.startswith("pulsar_msg_backlog{")]
        assert backlog == ['pulsar_msg_backlog{cluster="standalone",namespace="public/default"} 6.0']
        assert 'pulsar_topics_count{cluster="standalone",namespace="public/default"} 3.0' in text
        assert 'topic="' not in text
        for consumer in consumers:
            consumer.close()
        client.close()
    finally:
        server.stop()
