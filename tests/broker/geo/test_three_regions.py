"""Three regions: every message once in every region (full mesh, no loops), and replicated
subscriptions with PIP-33's two rounds of snapshot requests."""

from __future__ import annotations

import os
import signal
import time

import pulsar
import pytest

from magnetar.chaos.network.actions import heal_partition, partition_regions
from tests.broker.geo.conftest import Regions
from tests.broker.geo.test_replicated_subscriptions import snapshots_completed, subscription_backlog, wait_for
from tests.broker.geo.test_replication import receive_all

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

ALL = ("east", "west", "south")


def replicated_topic(
    regions: Regions, namespace: str
) -> tuple[str, dict[str, pulsar.Client], pulsar.Consumer, dict[str, pulsar.Producer]]:
    """A topic replicated to all three regions: a client and a producer in each, and a consumer
    on a replicated Failover subscription in east."""
    topic = f"persistent://{regions.replicated_namespace(namespace, ALL)}/t"
    clients = {r: regions.client(r) for r in ALL}
    consumer = clients["east"].subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Failover, replicate_subscription_state_enabled=True
    )
    producers = {r: c.create_producer(topic, batching_enabled=False) for r, c in clients.items()}
    return topic, clients, consumer, producers


def test_three_regions_replicate_and_keep_a_subscription_in_step(three_regions: Regions) -> None:
    regions = three_regions
    topic, clients, consumer, producers = replicated_topic(regions, "trio/ns")
    # Two rounds: the snapshot completes once both remotes answered a second request.
    done = snapshots_completed(regions, "east", topic)
    wait_for(lambda: snapshots_completed(regions, "east", topic) > done, "a two-round snapshot")
    sent = []
    for i in range(5):
        for region, producer in producers.items():
            producer.send(f"{region}-{i}".encode())
            sent.append(f"{region}-{i}")
    # Snapshots are taken only while messages come (an idle topic gets no markers): count from
    # the last send, so the one that follows them is not missed while receiving.
    done = snapshots_completed(regions, "east", topic)
    got = receive_all(consumer, len(sent))
    assert sorted(got) == sorted(sent), "each region's messages exactly once"
    wait_for(lambda: snapshots_completed(regions, "east", topic) > done, "a snapshot after them")
    producers["east"].send(b"last")  # the mark-delete passes the snapshot when this is acked
    message = consumer.receive(10_000)
    assert message.data() == b"last"
    consumer.acknowledge(message)
    for region in ("west", "south"):
        wait_for(lambda r=region: subscription_backlog(regions, r, topic, "sub") == 1, f"{region} in step")
    consumer.close()
    failover = clients["south"].subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Failover, replicate_subscription_state_enabled=True
    )
    assert receive_all(failover, 1, timeout_s=30) == ["last"], "south resumes after what east acknowledged"
    for client in clients.values():
        client.close()


def wait_for_snapshots_to_settle(regions: Regions, region: str, topic: str, timeout_s: float = 60) -> None:
    """Snapshots are taken only while messages come: once none completed for two intervals and
    none is pending, the last one covers every message the topic had."""
    deadline = time.monotonic() + timeout_s
    seen, since = -1, time.monotonic()
    while time.monotonic() - since < 2.5:
        if time.monotonic() > deadline:
            raise AssertionError(f"snapshots of {topic} in {region} did not settle")
        stats = regions.stats(region, topic)["replicatedSubscriptions"] or {}
        count = int(stats.get("snapshotsCompleted", 0))
        if count != seen or stats.get("snapshotsPending") or count == 0:
            seen, since = count, time.monotonic()
        time.sleep(0.2)


def test_snapshots_resume_once_an_unreachable_region_is_removed(three_regions: Regions) -> None:
    """(b): south stops answering (frozen), so no snapshot completes (none may without every
    region); once south is removed from the namespace, snapshots complete among east and west."""
    regions = three_regions
    namespace = regions.replicated_namespace("trio/removed", ALL)
    topic = f"persistent://{namespace}/t"
    east = regions.client("east")
    consumer = east.subscribe(topic, "sub", replicate_subscription_state_enabled=True)
    for region in ALL:  # the topic exists everywhere before south goes quiet
        regions.client(region).create_producer(topic).send(region.encode())
    wait_for_snapshots_to_settle(regions, "east", topic)  # the last one covers all three
    south = regions.broker("south").pid
    os.kill(south, signal.SIGSTOP)
    producer = east.create_producer(topic)
    try:
        stalled = snapshots_completed(regions, "east", topic)
        producer.send(b"while south is frozen")  # a snapshot is due only when messages came
        wait_for(lambda: regions.stats("east", topic)["replicatedSubscriptions"]["snapshotsPending"] > 0,
                 "a snapshot waiting for south")  # fmt: skip
        assert snapshots_completed(regions, "east", topic) <= stalled + 1  # at most one in flight
        regions.call("east", "POST", f"/admin/v2/namespaces/{namespace}/replication", ["east", "west"])
        stalled = snapshots_completed(regions, "east", topic)
        producer.send(b"without south")
        wait_for(lambda: snapshots_completed(regions, "east", topic) > stalled, "snapshots without south")
    finally:
        os.kill(south, signal.SIGCONT)
    consumer.close()
    east.close()


def test_a_message_that_reached_one_region_first_is_never_skipped(three_regions: Regions) -> None:
    """PIP-33's M1-b race, with real links cut one direction at a time: east (a) starts a
    snapshot; M1-b from west (b) reaches south (c) before east's request does, and has not
    reached east. South's answer covers M1-b; an east consumer that never saw M1-b must not
    move south's subscription past it. PIP-33's second round makes the snapshot wait for
    west's second answer, which comes after M1-b on the same link."""
    regions = three_regions
    topic, clients, consumer, producers = replicated_topic(regions, "trio/m1b")
    for region, producer in producers.items():  # every replicator connected before any cut
        producer.send(f"warm-{region}".encode())
    for message in receive_all_messages(consumer, 3):
        consumer.acknowledge(message)
    wait_for_snapshots_to_settle(regions, "east", topic)
    links = {"cluster_dir": str(regions.directory)}
    partition_regions(regions=["south"], from_regions=["east"], **links)
    try:
        producers["east"].send(b"m0")  # a snapshot is due: its request reaches west, not south
        wait_for(lambda: regions.stats("east", topic)["replicatedSubscriptions"]["snapshotsPending"] > 0,
                 "east's snapshot request")  # fmt: skip
        time.sleep(1)  # west's answer reaches east (that link flows)
        partition_regions(regions=["east"], from_regions=["west"], **links)
        in_south = regions.stats("south", topic)["msgInCounter"]
        producers["west"].send(b"M1-b")  # reaches south, not east
        wait_for(lambda: regions.stats("south", topic)["msgInCounter"] > in_south, "M1-b in south")
        heal_partition(regions=["south"], from_regions=["east"], **links)  # south's answer covers M1-b
        message = consumer.receive(10_000)
        assert message.data() == b"m0"
        consumer.acknowledge(message)  # everything east has; one round would let this pass M1-b
        time.sleep(3)  # time enough for a one-round snapshot, its update, and south applying it
    finally:
        heal_partition(**links)
    consumer.close()  # without M1-b acknowledged (it may have reached east by now)
    failover = clients["south"].subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Failover, replicate_subscription_state_enabled=True
    )
    got = [m.data() for m in receive_all_messages(failover, 0, timeout_ms=3000)]
    assert b"M1-b" in got, f"south skipped M1-b, which the consumer never received: got {got}"
    for client in clients.values():
        client.close()


def receive_all_messages(
    consumer: pulsar.Consumer, at_least: int, timeout_ms: int = 10_000
) -> list[pulsar.Message]:
    """At least ``at_least`` messages, then whatever else comes before ``timeout_ms`` of quiet."""
    got: list[pulsar.Message] = []
    while True:
        try:
            got.append(consumer.receive(timeout_ms))
        except pulsar.Timeout:
            if len(got) >= at_least:
                return got
            raise
