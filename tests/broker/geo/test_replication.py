"""Geo-replication between two regions with the official client: namespaces shared through the
configuration store, messages produced in one region consumed in the other in order, each
message once per region whatever side it was produced on, nothing lost while a region is down."""

from __future__ import annotations

import os
import signal
import time

import click
import pulsar
import pytest
from click.testing import CliRunner

from magnetar.admin.cli import admin
from magnetar.local.supervisor import alive
from tests.broker.geo.conftest import Regions

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


def receive_all(consumer: pulsar.Consumer, expected: int, timeout_s: float = 60) -> list[str]:
    """Everything received until ``expected`` messages came and nothing more follows shortly."""
    got: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            message = consumer.receive(2000 if len(got) >= expected else 5000)
        except pulsar.Timeout:
            if len(got) >= expected:
                break
            continue
        got.append(message.data().decode())
        consumer.acknowledge(message)
    return got


def test_clusters_and_namespaces_are_shared_by_the_regions(regions: Regions) -> None:
    assert sorted(regions.call("west", "GET", "/admin/v2/clusters")) == ["east", "west"]
    regions.replicated_namespace("acme/shared")
    # Created through east, seen by west: one configuration store.
    assert regions.call("west", "GET", "/admin/v2/namespaces/acme/shared/replication") == ["east", "west"]
    regions.call("west", "POST", "/admin/v2/namespaces/acme/shared/replication", ["west"])
    assert regions.call("east", "GET", "/admin/v2/namespaces/acme/shared/replication") == ["west"]
    with pytest.raises(click.ClickException, match="unknown clusters"):
        regions.call("east", "POST", "/admin/v2/namespaces/acme/shared/replication", ["east", "mars"])
    with pytest.raises(click.ClickException, match="unknown clusters"):
        regions.call("east", "PUT", "/admin/v2/namespaces/acme/other", {"replication_clusters": ["mars"]})


def test_admin_cli_across_regions(regions: Regions) -> None:
    """``magnetar admin`` in pulsar-admin's shapes: a namespace created through one region, its
    clusters changed through the other."""
    east = regions.admin("east").url
    west = regions.admin("west").url

    def cli(url: str, *args: str) -> str:
        result = CliRunner().invoke(admin, ["--admin-url", url, *args])
        assert result.exit_code == 0, result.output
        return result.output

    assert cli(west, "clusters", "list").split() == ["east", "west"]
    cli(east, "tenants", "create", "cli", "--allowed-clusters", "east,west")
    cli(east, "namespaces", "create", "--clusters", "east,west", "cli/ns")
    assert cli(west, "namespaces", "get-clusters", "cli/ns").split() == ["east", "west"]
    cli(west, "namespaces", "set-clusters", "cli/ns", "--clusters", "east")
    assert cli(east, "namespaces", "get-clusters", "cli/ns").split() == ["east"]
    cli(east, "clusters", "create", "mars", "--broker-url", "pulsar://127.0.0.1:1")
    assert "mars" in cli(west, "clusters", "list").split()


def test_produced_in_one_region_consumed_in_the_other_in_order(regions: Regions) -> None:
    namespace = regions.replicated_namespace("acme/orders")
    topic = f"persistent://{namespace}/t1"
    east, west = regions.client("east"), regions.client("west")
    consumer = west.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = east.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
    sent = [f"m{i}" for i in range(300)]
    for text in sent:
        producer.send_async(text.encode(), None)
    producer.flush()
    assert receive_all(consumer, len(sent)) == sent
    # The topic exists in both regions; east reports its replicator to west.
    assert topic in regions.call("west", "GET", f"/admin/v2/persistent/{namespace}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        replication = regions.stats("east", topic)["replication"]
        if replication.get("west", {}).get("replicationBacklog") == 0:
            break
        time.sleep(0.5)
    assert replication["west"]["connected"] is True
    assert replication["west"]["replicationBacklog"] == 0
    assert replication["west"]["msgOutCounter"] == len(sent)
    # The replicator's cursor is no subscription users see.
    assert list(regions.stats("east", topic)["subscriptions"]) == []
    east.close()
    west.close()


def test_messages_produced_in_both_regions_arrive_once_in_each(regions: Regions) -> None:
    namespace = regions.replicated_namespace("acme/both")
    topic = f"persistent://{namespace}/t"
    clients = {r: regions.client(r) for r in ("east", "west")}
    consumers = {
        r: c.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        for r, c in clients.items()
    }
    producers = {r: c.create_producer(topic) for r, c in clients.items()}
    expected = []
    for i in range(100):
        for region, producer in producers.items():
            text = f"{region}-{i}"
            producer.send_async(text.encode(), None)
            expected.append(text)
    for producer in producers.values():
        producer.flush()
    for region, consumer in consumers.items():
        got = receive_all(consumer, len(expected))
        assert sorted(got) == sorted(expected), f"{region}: each message exactly once"
        for origin in ("east", "west"):  # each origin's messages keep their order
            mine = [m for m in got if m.startswith(origin)]
            assert mine == [f"{origin}-{i}" for i in range(100)]
    for client in clients.values():
        client.close()


def test_a_region_down_during_replication_loses_nothing(regions: Regions) -> None:
    namespace = regions.replicated_namespace("acme/outage")
    topic = f"persistent://{namespace}/t"
    west = regions.client("west")
    west.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest).close()
    west.close()
    east = regions.client("east")
    producer = east.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    kill(regions, "west-broker-0")  # the whole of west's serving side, without a goodbye
    sent = ["before"] + [f"during-{i}" for i in range(200)]
    for text in sent[1:]:
        producer.send_async(text.encode(), None)
    producer.flush()
    time.sleep(1)  # the replicator notices and backs off
    regions.supervisor.restart("west-broker-0")
    served(regions, "west", topic)
    west = regions.client("west")
    consumer = west.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    got = receive_all(consumer, len(sent), timeout_s=120)
    assert got == sent, "in order, nothing lost, nothing twice"
    east.close()
    west.close()


def served(regions: Regions, region: str, topic: str, timeout_s: float = 60) -> None:
    """Wait until ``region`` serves ``topic`` again: a broker restarted on its old port finds its
    previous incarnation's ownership nodes until that ZooKeeper session expires."""
    path = topic.removeprefix("persistent://")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            regions.call(region, "GET", f"/lookup/v2/topic/persistent/{path}")
            regions.stats(region, topic)
            return
        except click.ClickException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def kill(regions: Regions, name: str) -> None:
    pid = next(p.pid for p in regions.state.processes if p.name == name)
    os.kill(pid, signal.SIGKILL)
    while alive(pid):
        time.sleep(0.05)


def test_restarts_and_unloads_on_either_side_lose_and_duplicate_nothing(regions: Regions) -> None:
    """The source broker killed right after its producer's sends were acknowledged (the
    replicator's cursor not yet persisted: it sends again), and the topic unloaded in the remote
    region mid-stream (the replicator's producer closed there): each message arrives in the
    remote region exactly once, in order."""
    namespace = regions.replicated_namespace("acme/restarts")
    topic = f"persistent://{namespace}/t"
    path = topic.removeprefix("persistent://")
    west = regions.client("west")
    consumer = west.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    east = regions.client("east")
    producer = east.create_producer(topic, batching_enabled=False)
    sent = [f"a{i}" for i in range(300)]
    for index, text in enumerate(sent):
        producer.send_async(text.encode(), None)
        if index == 150:
            regions.call("west", "PUT", f"/admin/v2/persistent/{path}/unload")
    producer.flush()
    east.close()
    kill(regions, "east-broker-0")
    regions.supervisor.restart("east-broker-0")
    served(regions, "east", topic)
    east = regions.client("east")
    producer = east.create_producer(topic, batching_enabled=False)
    more = [f"b{i}" for i in range(50)]
    for text in more:
        producer.send_async(text.encode(), None)
    producer.flush()
    assert receive_all(consumer, len(sent) + len(more), timeout_s=120) == sent + more
    east.close()
    west.close()


def test_a_producer_restarting_its_sequence_under_a_fixed_name_loses_nothing(regions: Regions) -> None:
    """Without deduplication, a producer created again under the same name starts its sequence
    ids at 0 again: the remote must not take its new messages for resends of the old ones."""
    namespace = regions.replicated_namespace("acme/fixed")
    topic = f"persistent://{namespace}/t"
    west = regions.client("west")
    consumer = west.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    east = regions.client("east")
    sent = []
    for incarnation in range(2):
        producer = east.create_producer(topic, producer_name="fixed", batching_enabled=False)
        for i in range(5):
            producer.send(f"{incarnation}-{i}".encode())
            sent.append(f"{incarnation}-{i}")
        producer.close()
    assert receive_all(consumer, len(sent)) == sent
    east.close()
    west.close()
