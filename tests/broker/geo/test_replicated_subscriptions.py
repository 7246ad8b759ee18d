"""Replicated subscriptions (PIP-33) between two regions with the official client: the article's
scenario (m0-m3 produced in east, m0 and m1 acknowledged, the consumer fails over to west and
resumes at m2), and markers invisible to consumers and to the stats users see."""

from __future__ import annotations

import time
from collections.abc import Callable

import pulsar
import pytest

from tests.broker.geo.conftest import Regions

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def receive_until_quiet(consumer: pulsar.Consumer) -> list[str]:
    """Every message that comes until none has for 3 s, each acknowledged."""
    got: list[str] = []
    while True:
        try:
            message = consumer.receive(3000)
        except pulsar.Timeout:
            return got
        got.append(message.data().decode())
        consumer.acknowledge(message)


def snapshots_completed(regions: Regions, region: str, topic: str) -> int:
    stats = regions.stats(region, topic)["replicatedSubscriptions"]
    return int(stats["snapshotsCompleted"]) if stats else 0


def wait_for_snapshots_covering(regions: Regions, region: str, topics: list[str], before: list[int]) -> None:
    """Until each of ``topics`` completed a snapshot since ``before`` (their counts before the
    last sends) and none is pending or started for a second: a snapshot that began amid the
    sends is followed by one that covers the rest (one per second while messages came)."""
    settled_since: float | None = None
    last: list[int] = []
    deadline = time.monotonic() + 60
    while True:
        replicated = [regions.stats(region, t)["replicatedSubscriptions"] or {} for t in topics]
        done = [int(r.get("snapshotsCompleted", 0)) for r in replicated]
        quiet = all(d > b for d, b in zip(done, before, strict=True)) and not any(
            r.get("snapshotsPending") for r in replicated
        )
        if not quiet or settled_since is None or done != last:
            settled_since = time.monotonic() if quiet else None
        elif time.monotonic() - settled_since > 1.5:
            return
        last = done
        if time.monotonic() > deadline:
            raise AssertionError(f"snapshots of {topics} did not settle: {replicated}")
        time.sleep(0.2)


def subscription_backlog(regions: Regions, region: str, topic: str, name: str) -> int | None:
    subscription = regions.stats(region, topic)["subscriptions"].get(name)
    return None if subscription is None else int(subscription["msgBacklog"])


def test_a_consumer_failing_over_resumes_where_it_left_off(regions: Regions) -> None:
    namespace = regions.replicated_namespace("pip33/article")
    topic = f"persistent://{namespace}/t"
    east, west = regions.client("east"), regions.client("west")
    consumer = east.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Failover, replicate_subscription_state_enabled=True
    )
    producer = east.create_producer(topic, batching_enabled=False)
    for text in ("m0", "m1"):
        producer.send(text.encode())
    # A snapshot taken between m1 and m2 (one every second while the subscription exists).
    done = snapshots_completed(regions, "east", topic)
    wait_for(lambda: snapshots_completed(regions, "east", topic) > done, "a snapshot")
    for text in ("m2", "m3"):
        producer.send(text.encode())
    for expected in ("m0", "m1"):
        message = consumer.receive(10_000)
        assert message.data().decode() == expected
        consumer.acknowledge(message)
    # The update marker moves west's subscription (created by it) past m1: m2 and m3 are left.
    wait_for(lambda: subscription_backlog(regions, "west", topic, "sub") == 2, "west's subscription to move")
    # how long the snapshot took and how long the subscription waited to pass it, for whoever
    # wonders where a failover's duplicates come from
    timing = regions.stats("east", topic)["replicatedSubscriptions"]
    assert 0 < timing["snapshotMillisP50"] <= timing["snapshotMillisMax"]
    assert 0 < timing["updateWaitMillisP50"] <= timing["updateWaitMillisMax"]
    consumer.close()  # east is lost to this consumer: it fails over to west

    failover = west.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Failover, replicate_subscription_state_enabled=True
    )
    got = receive_until_quiet(failover)
    assert got == ["m2", "m3"], "resumes at m2: nothing skipped, nothing acknowledged in east again"
    east.close()
    west.close()


def test_markers_are_invisible_to_consumers_and_user_stats(regions: Regions) -> None:
    namespace = regions.replicated_namespace("pip33/markers")
    topic = f"persistent://{namespace}/t"
    east = regions.client("east")
    consumer = east.subscribe(topic, "sub", replicate_subscription_state_enabled=True)
    idle = east.subscribe(topic, "idle", replicate_subscription_state_enabled=True)
    producer = east.create_producer(topic, batching_enabled=False)
    sent = [f"m{i}" for i in range(20)]
    for index, text in enumerate(sent):
        producer.send(text.encode())
        if index % 5 == 4:  # snapshots interleaved with the messages
            done = snapshots_completed(regions, "east", topic)
            wait_for(lambda done=done: snapshots_completed(regions, "east", topic) > done, "a snapshot")
    got = receive_until_quiet(consumer)
    assert got == sent, "markers are never dispatched"
    # The topic ends with a snapshot's markers: a reader still stops at the last message.
    reader = east.create_reader(topic, pulsar.MessageId.earliest)
    read = []
    while reader.has_message_available():
        read.append(reader.read_next(10_000).data().decode())
    assert read == sent, "the last message id a reader is given is a message's, not a marker's"
    reader.close()
    stats = regions.stats("east", topic)
    assert stats["markerMessagesCounter"] > 0
    assert stats["msgInCounter"] == len(sent)
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0
    assert stats["subscriptions"]["idle"]["msgBacklog"] == len(sent), "markers are not in the backlog"
    # A topic whose namespace is not replicated gets no markers.
    local = "persistent://public/default/pip33-local"
    plain = east.subscribe(local, "sub", replicate_subscription_state_enabled=True)
    east.create_producer(local).send(b"x")
    assert plain.receive(10_000).data() == b"x"
    time.sleep(2.5)  # two snapshot intervals: none may start
    assert regions.stats("east", local)["markerMessagesCounter"] == 0
    idle.close()
    east.close()


@pytest.mark.parametrize("carry", [False, True])
def test_individual_acks_past_the_snapshot_point(regions: Regions, carry: bool) -> None:
    """m1 is left unacknowledged in east, m0 and m2-m9 acknowledged: the mark-delete stays
    before m1. PIP-33 alone gets all of m0-m9 again after a failover; with (a) the update names
    what was acknowledged and only m1 comes again. Never is m1 skipped."""
    namespace = regions.replicated_namespace(f"pip33/carry-{str(carry).lower()}")
    regions.call("east", "POST", f"/admin/v2/namespaces/{namespace}/replicatedSubscriptionsCarryAcks", carry)
    topic = f"persistent://{namespace}/t"
    east, west = regions.client("east"), regions.client("west")
    consumer = east.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Shared, replicate_subscription_state_enabled=True
    )
    producer = east.create_producer(topic, batching_enabled=False)
    producer.send(b"first")
    done = snapshots_completed(regions, "east", topic)
    wait_for(lambda: snapshots_completed(regions, "east", topic) > done, "a snapshot")
    consumer.acknowledge(consumer.receive(10_000))  # past the snapshot: west follows
    wait_for(lambda: subscription_backlog(regions, "west", topic, "sub") == 0, "west's subscription")
    sent = [f"m{i}" for i in range(10)]
    for text in sent:
        producer.send(text.encode())
    for _ in sent:
        message = consumer.receive(10_000)
        if message.data() != b"m1":
            consumer.acknowledge(message)
    expected = ["m1"] if carry else sent
    wait_for(
        lambda: subscription_backlog(regions, "west", topic, "sub") == len(expected), "west's subscription"
    )
    consumer.close()
    failover = west.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Shared, replicate_subscription_state_enabled=True
    )
    got = receive_until_quiet(failover)
    assert sorted(got) == sorted(expected)
    east.close()
    west.close()


def test_a_partitioned_topic_replicates_and_fails_over_per_partition(regions: Regions) -> None:
    """Four partitions created once (the configuration store holds the count for both regions):
    east's messages reach a partitioned consumer in west in per-key order, and a subscription
    acknowledged up to a snapshot in east resumes in west at the same point of every partition."""
    namespace = regions.replicated_namespace("pip33/partitioned")
    topic = f"persistent://{namespace}/orders"
    partitions = [f"{topic}-partition-{i}" for i in range(4)]
    regions.call("east", "PUT", f"/admin/v2/persistent/{namespace}/orders/partitions", 4)
    assert regions.call("west", "GET", f"/admin/v2/persistent/{namespace}/orders/partitions") == {
        "partitions": 4
    }
    east, west = regions.client("east"), regions.client("west")
    consumer = east.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Failover, replicate_subscription_state_enabled=True
    )
    producer = east.create_producer(topic, batching_enabled=False)  # routed by the key's hash
    keys = "abcdefghijklmnop"

    def send(phase: str) -> list[str]:
        texts = [f"{phase}-{key}-{n}" for n in range(3) for key in keys]
        for text in texts:
            producer.send(text.encode(), partition_key=text.split("-")[1])
        return texts

    before = [snapshots_completed(regions, "east", p) for p in partitions]
    first = send("a")
    # a snapshot after the first phase on every partition it reached
    used = [i for i, p in enumerate(partitions) if regions.stats("east", p)["msgInCounter"]]
    assert len(used) > 1, "the keys spread over the partitions"
    wait_for_snapshots_covering(regions, "east", [partitions[i] for i in used], [before[i] for i in used])
    second = send("b")
    got: list[str] = []
    while len(got) < len(first):
        message = consumer.receive(10_000)
        text = message.data().decode()
        if text.startswith("a-"):  # the second phase stays unacknowledged
            got.append(text)
            consumer.acknowledge(message)
    assert sorted(got) == sorted(first)
    # West's subscription on every partition moves past the first phase: the second is left.
    wait_for(
        lambda: sum(subscription_backlog(regions, "west", p, "sub") or 0 for p in partitions) == len(second),
        "west's subscriptions to move",
    )
    consumer.close()
    producer.close()

    failover = west.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Failover, replicate_subscription_state_enabled=True
    )
    resumed = receive_until_quiet(failover)
    assert sorted(resumed) == sorted(second), "resumes after the first phase on every partition"
    for key in keys:
        of_key = [t for t in resumed if t.split("-")[1] == key]
        assert of_key == [t for t in second if t.split("-")[1] == key], f"key {key} in order"
    east.close()
    west.close()
