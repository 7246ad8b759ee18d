"""What an idle topic costs the broker: no asyncio task of its own. A topic with a producer and
an Exclusive consumer, at rest, holds no dispatcher task and no managed-ledger maintenance task
(those wake by callback and by the factory's one timer), and still delivers what comes after the
rest, also to a consumer that only asks for more after it (its next permits)."""

from __future__ import annotations

import time
from typing import Any

from tests.broker.conftest import admin_call
from tests.broker.e2e.conftest import Standalone

TOPICS = 200


def event_loop(standalone: Standalone) -> dict[str, Any]:
    status, body = admin_call("GET", standalone.web_service_url + "/admin/v2/broker-stats/event-loop")
    assert status == 200, body
    assert isinstance(body, dict)
    return body


def test_idle_topics_hold_no_task_each_and_still_deliver(standalone: Standalone) -> None:
    client = standalone.client()
    try:
        # One topic first: what the broker runs for any topic at all (connections, the
        # namespace's bundle) is counted before the 200 being measured.
        warm = client.create_producer("persistent://public/default/idle-warm")
        client.subscribe("persistent://public/default/idle-warm", "s").close()
        warm.send(b"warm")
        before = event_loop(standalone)["tasks"]
        names = [f"persistent://public/default/idle-{i}" for i in range(TOPICS)]
        # A small receiver queue: the consumer needs permits again after its first message.
        consumers = [client.subscribe(name, "s", receiver_queue_size=2) for name in names]
        producers = [client.create_producer(name, batching_enabled=False) for name in names]
        # At rest: each message through every topic went out and its round ended.
        for producer, consumer in zip(producers, consumers, strict=True):
            producer.send(b"first")
            message = consumer.receive(30_000)
            assert message.data() == b"first"
            consumer.acknowledge(message)
        # What the last acknowledgements started (a cursor's flush, 100 ms after its ack) ends by
        # itself; a task each topic keeps never does.
        deadline = time.monotonic() + 60
        while True:
            loop = event_loop(standalone)
            grown = loop["tasks"] - before
            if grown < TOPICS // 5 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert grown < TOPICS // 5, f"{grown} more tasks for {TOPICS} idle topics: {loop['tasksByCoroutine']}"

        # After the rest, more than the first permits cover, on every topic: the idle dispatcher
        # wakes for new entries and for the permits that follow each receipt.
        for producer in producers:
            for i in range(5):
                producer.send_async(f"later-{i}".encode(), None)
        for producer in producers:
            producer.flush()
        for consumer in consumers:
            received = []
            for _ in range(5):
                message = consumer.receive(30_000)
                received.append(message.data())
                consumer.acknowledge(message)
            assert received == [f"later-{i}".encode() for i in range(5)]
    finally:
        client.close()
