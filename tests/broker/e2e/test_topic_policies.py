"""Topic policies, namespace and topic level, through the official Go admin client and enforced by
the broker, checked with the official Python client: TTL expires messages, backlog
quotas hold, refuse or evict, producer and consumer limits refuse, rate limits hold their rate
within 10 %, retention keeps consumed data."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pulsar
import pytest

from tests.admin_go import GoAdmin
from tests.broker.e2e.conftest import Standalone

NS = "public/default"
#: checks run often here, so a test sees a policy enforced within seconds
FAST_CHECKS = {
    "message_expiry_check_interval_in_minutes": 0.01,
    "backlog_quota_check_interval_in_seconds": 0.5,
    "topic_policies_check_interval_seconds": 0.5,
    "managed_ledger_max_entries_per_ledger": 10,
    "managed_ledger_min_ledger_rollover_time_minutes": 0,
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Standalone]:
    standalone = Standalone(tmp_path / "standalone", **FAST_CHECKS).start()
    yield standalone
    try:
        standalone.stop()
    finally:
        standalone.kill()


@pytest.fixture
def admin(server: Standalone) -> Iterator[GoAdmin]:
    driver = GoAdmin(server.web_service_url)
    yield driver
    driver.close()


def _until(condition: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        time.sleep(0.2)


def _backlog(admin: GoAdmin, topic: str, subscription: str) -> int:
    return int(admin.ok("topics.stats", topic=topic)["subscriptions"][subscription]["msgBacklog"])


def test_policies_are_set_read_and_removed_at_both_levels(server: Standalone, admin: GoAdmin) -> None:
    topic = f"persistent://{NS}/configured"
    admin.ok("topics.create", topic=topic, partitions=0)
    admin.ok("namespaces.setMessageTTL", namespace=NS, value=3600)
    assert admin.ok("namespaces.getMessageTTL", namespace=NS) == 3600
    assert admin.ok("topics.getMessageTTL", topic=topic) == -1  # not set on the topic itself
    admin.ok("topics.setMessageTTL", topic=topic, value=60)
    assert admin.ok("topics.getMessageTTL", topic=topic) == 60
    admin.ok("topics.removeMessageTTL", topic=topic)
    assert admin.ok("topics.getMessageTTL", topic=topic) == -1

    admin.ok("namespaces.setRetention", namespace=NS, retentionMinutes=10, retentionMB=5)
    assert admin.ok("namespaces.getRetention", namespace=NS) == {
        "retentionTimeInMinutes": 10,
        "retentionSizeInMB": 5,
    }
    applied = admin.ok("topics.getRetention", topic=topic, applied=True)
    assert applied == {"retentionTimeInMinutes": 10, "retentionSizeInMB": 5}
    admin.ok("topics.setRetention", topic=topic, retentionMinutes=1, retentionMB=-1)
    assert admin.ok("topics.getRetention", topic=topic, applied=True)["retentionTimeInMinutes"] == 1

    admin.ok("topics.setBacklogQuota", topic=topic, limitSize=1000, policy="producer_exception")
    quota = admin.ok("topics.getBacklogQuotaMap", topic=topic)["destination_storage"]
    assert (quota["limitSize"], quota["policy"]) == (1000, "producer_exception")
    admin.ok("topics.setMaxProducers", topic=topic, value=3)
    assert admin.ok("topics.getMaxProducers", topic=topic) == 3
    admin.ok("topics.setPublishRate", topic=topic, rateMsg=100, rateBytes=-1)
    assert admin.ok("topics.getPublishRate", topic=topic)["publishThrottlingRateInMsg"] == 100

    # Out of range, unknown policies and missing topics: Pulsar's statuses.
    assert admin("topics.setMessageTTL", topic=topic, value=-5).code == 412
    assert admin("topics.setBacklogQuota", topic=topic, limitSize=10, policy="bogus").code == 412
    assert admin("namespaces.setMaxProducersPerTopic", namespace=NS, value=-1).code == 412
    assert admin("topics.setMessageTTL", topic=f"persistent://{NS}/nowhere", value=5).code == 404


def test_a_message_ttl_expires_unacknowledged_messages(server: Standalone, admin: GoAdmin) -> None:
    expiring, kept = f"persistent://{NS}/expiring", f"persistent://{NS}/kept"
    client = server.client()
    for topic in (expiring, kept):
        client.subscribe(topic, "idle").close()
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(5):
            producer.send(f"old{i}".encode())
    admin.ok("topics.setMessageTTL", topic=expiring, value=1)
    _until(lambda: _backlog(admin, expiring, "idle") == 0)
    assert _backlog(admin, kept, "idle") == 5  # no TTL there

    client.create_producer(expiring, batching_enabled=False).send(b"fresh")
    consumer = client.subscribe(expiring, "idle")
    assert consumer.receive(10_000).data() == b"fresh"
    client.close()


def test_backlog_quotas_refuse_hold_or_evict(server: Standalone, admin: GoAdmin) -> None:
    client = server.client()
    payload = b"x" * 100
    topics = {policy: f"persistent://{NS}/quota-{policy}" for policy in
              ("producer_exception", "producer_request_hold", "consumer_backlog_eviction")}  # fmt: skip
    for policy, topic in topics.items():
        client.subscribe(topic, "slow").close()
        producer = client.create_producer(topic, batching_enabled=False)
        for _ in range(50):
            producer.send(payload)
        producer.close()
        # Set once the backlog is there: a periodic check finding the quota exceeded while these
        # sends were going would hold the producer_request_hold producer's sends (as it should),
        # and this loop would time out instead of testing anything.
        admin.ok("topics.setBacklogQuota", topic=topic, limitSize=2000, policy=policy)

    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        client.create_producer(topics["producer_exception"])
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededError):
        client.create_producer(topics["producer_request_hold"])
    # Eviction: the oldest messages of the slow subscription go; producers are not refused.
    _until(lambda: _backlog(admin, topics["consumer_backlog_eviction"], "slow") < 20)
    client.create_producer(topics["consumer_backlog_eviction"]).send(b"still taken")

    # Once the backlog is consumed (cleared), producers are taken again.
    admin.ok("subscriptions.clearBacklog", topic=topics["producer_exception"], subscription="slow")
    client.create_producer(topics["producer_exception"]).send(b"taken again")
    client.close()


def test_producer_and_consumer_limits(server: Standalone, admin: GoAdmin) -> None:
    topic = f"persistent://{NS}/limited"
    admin.ok("topics.create", topic=topic, partitions=0)
    admin.ok("topics.setMaxProducers", topic=topic, value=1)
    admin.ok("topics.setMaxConsumers", topic=topic, value=1)
    client = server.client()
    client.create_producer(topic)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    client.subscribe(topic, "one")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "two")
    client.close()


def _steady_rate(stamps: list[float], skip: int) -> float:
    """Messages per second from the ``skip``-th stamp to the last (the first window is a burst)."""
    stamps = sorted(stamps)
    return (len(stamps) - skip) / (stamps[-1] - stamps[skip - 1])


def test_a_publish_rate_limit_holds_its_rate(server: Standalone, admin: GoAdmin) -> None:
    topic = f"persistent://{NS}/publish-limited"
    admin.ok("topics.create", topic=topic, partitions=0)
    admin.ok("topics.setPublishRate", topic=topic, rateMsg=200, rateBytes=-1)
    client = server.client()
    producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=2000)
    stamps: list[float] = []
    done = threading.Event()
    failures: list[object] = []

    def sent(result: object, _id: object) -> None:
        if result != pulsar.Result.Ok:
            failures.append(result)
        stamps.append(time.monotonic())
        if len(stamps) == 1000:
            done.set()

    for i in range(1000):
        producer.send_async(f"m{i}".encode(), sent)
    assert done.wait(60)
    assert not failures
    rate = _steady_rate(stamps, skip=200)
    assert 180 <= rate <= 220, f"{rate:.0f} msg/s against a limit of 200"
    client.close()


def test_a_dispatch_rate_limit_holds_its_rate(server: Standalone, admin: GoAdmin) -> None:
    topic = f"persistent://{NS}/dispatch-limited"
    client = server.client()
    client.subscribe(topic, "reader").close()
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(500):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    admin.ok("topics.setDispatchRate", topic=topic, rateMsg=100, rateBytes=-1)
    consumer = client.subscribe(topic, "reader")
    stamps = []
    for i in range(500):
        message = consumer.receive(10_000)
        assert message.data() == f"m{i}".encode()
        consumer.acknowledge(message)
        stamps.append(time.monotonic())
    rate = _steady_rate(stamps, skip=100)
    assert 90 <= rate <= 110, f"{rate:.0f} msg/s against a limit of 100"
    client.close()


def test_retention_keeps_consumed_data_for_the_time_asked(server: Standalone, admin: GoAdmin) -> None:
    kept, dropped = f"persistent://{NS}/retained", f"persistent://{NS}/not-retained"
    client = server.client()
    for topic in (kept, dropped):
        admin.ok("topics.create", topic=topic, partitions=0)
    admin.ok("topics.setRetention", topic=kept, retentionMinutes=60, retentionMB=-1)
    for topic in (kept, dropped):
        consumer = client.subscribe(topic, "all")
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(60):  # six ledgers of ten
            producer.send(f"m{i}".encode())
        for _ in range(60):
            consumer.acknowledge(consumer.receive(10_000))
        consumer.close()
        producer.send(b"one more")  # a roll, which trims what retention lets go

    def ledgers(topic: str) -> int:
        return len(admin.ok("topics.internalStats", topic=topic)["ledgers"] or [])

    _until(lambda: ledgers(dropped) <= 2)
    assert ledgers(kept) >= 6
    admin.ok("subscriptions.resetToMessageId", topic=kept, subscription="all", position="earliest")
    replay = client.subscribe(kept, "all")
    assert [replay.receive(10_000).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]
    client.close()


def test_delayed_delivery_can_be_turned_off(server: Standalone, admin: GoAdmin) -> None:
    held, immediate = f"persistent://{NS}/delayed", f"persistent://{NS}/not-delayed"
    client = server.client()
    for topic in (held, immediate):
        admin.ok("topics.create", topic=topic, partitions=0)
    admin.ok("topics.setDelayedDelivery", topic=immediate, active=False)
    assert admin.ok("topics.getDelayedDelivery", topic=immediate)["active"] is False
    waited = {}
    for topic in (held, immediate):
        consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        client.create_producer(topic).send(b"later", deliver_after=timedelta(seconds=4))
        started = time.monotonic()
        assert consumer.receive(10_000).data() == b"later"
        waited[topic] = time.monotonic() - started
    assert waited[held] >= 3.5, waited
    assert waited[immediate] < 1.5, waited
    client.close()
