"""Subscription management through the admin REST with the official client: create,
delete, clear-backlog and reset-cursor by publish time, as pulsar-admin scripts them."""

from __future__ import annotations

import http.client
import json
import time

import pulsar

from tests.broker.e2e.conftest import Standalone

TOPIC = "persistent://public/default/managed"
BASE = "/admin/v2/persistent/public/default/managed"


def _call(standalone: Standalone, method: str, path: str) -> tuple[int, object]:
    connection = http.client.HTTPConnection("127.0.0.1", standalone.web_port, timeout=30)
    try:
        connection.request(method, path, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        text = response.read()
        return response.status, json.loads(text) if text else None
    finally:
        connection.close()


def _backlog(standalone: Standalone, subscription: str) -> int:
    status, stats = _call(standalone, "GET", f"{BASE}/stats")
    assert status == 200
    assert isinstance(stats, dict)
    return int(stats["subscriptions"][subscription]["msgBacklog"])


def test_subscriptions_are_created_cleared_reset_and_deleted(standalone: Standalone) -> None:
    client = standalone.client()
    producer = client.create_producer(TOPIC, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(10)]

    # Created at the end: it gets only what is published after it.
    assert _call(standalone, "PUT", f"{BASE}/subscription/late")[0] == 204
    assert _call(standalone, "PUT", f"{BASE}/subscription/late")[0] == 409
    for i in range(10, 13):
        producer.send(f"m{i}".encode())
    late = client.subscribe(TOPIC, "late")
    assert [late.receive(10_000).data() for _ in range(3)] == [b"m10", b"m11", b"m12"]

    # A subscription with a consumer is not deleted unless forced.
    assert _call(standalone, "DELETE", f"{BASE}/subscription/late")[0] == 412
    late.close()
    assert _call(standalone, "DELETE", f"{BASE}/subscription/late")[0] == 204
    assert "late" not in _call(standalone, "GET", f"{BASE}/subscriptions")[1]  # type: ignore[operator]
    assert _call(standalone, "DELETE", f"{BASE}/subscription/late")[0] == 404

    # Clear-backlog: everything stored counts as acknowledged.
    client.subscribe(TOPIC, "cleared", initial_position=pulsar.InitialPosition.Earliest).close()
    assert _backlog(standalone, "cleared") == 13
    assert _call(standalone, "POST", f"{BASE}/subscription/cleared/skip_all")[0] == 204
    assert _backlog(standalone, "cleared") == 0

    # Reset-cursor by publish time: what was published from then on is delivered again.
    reader = client.subscribe(TOPIC, "again", initial_position=pulsar.InitialPosition.Earliest)
    received = [reader.receive(10_000) for _ in range(13)]
    for message in received:
        reader.acknowledge(message)
    at = received[6].publish_timestamp()
    assert _call(standalone, "POST", f"{BASE}/subscription/again/resetcursor/{at}")[0] == 204
    expected = [m.data() for m in received if m.publish_timestamp() >= at]  # messages 6.. (same ms too)
    assert [reader.receive(10_000).data() for _ in expected] == expected
    assert b"m0" not in expected
    assert received[0].message_id() == ids[0]
    assert _call(standalone, "POST", f"{BASE}/subscription/again/resetcursor/soon")[0] == 412
    client.close()


def test_internal_stats_name_the_ledger_a_subscriptions_acknowledgements_are_persisted_in(
    standalone: Standalone,
) -> None:
    topic, base = f"{TOPIC}-cursor-ledger", f"{BASE}-cursor-ledger"
    client = standalone.client()
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "persisted")
    producer.send(b"m")
    consumer.acknowledge(consumer.receive(10_000))
    deadline = time.monotonic() + 10
    while True:
        status, stats = _call(standalone, "GET", f"{base}/internalStats")
        assert status == 200
        assert isinstance(stats, dict)
        cursor_ledger = stats["cursors"]["persisted"]["cursorLedger"]
        if cursor_ledger != -1:
            break
        assert time.monotonic() < deadline, "the acknowledgement was never persisted in a cursor ledger"
        time.sleep(0.05)
    # a ledger of its own, not one of the topic's
    assert cursor_ledger not in {ledger["ledgerId"] for ledger in stats["ledgers"]}
    client.close()
