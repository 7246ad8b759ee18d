"""A real partition between two regions (the link proxies of ``magnetar local up`` cut by the
chaos lab's ``partition_regions``): each region keeps serving its own clients, nothing crosses
the cut, and everything produced during it is replicated, in order, once the link heals."""

from __future__ import annotations

import concurrent.futures
import os
import signal

import pulsar
import pytest

from magnetar.chaos.network.actions import heal_partition, partition_regions
from tests.broker.geo.conftest import Regions
from tests.broker.geo.test_replicated_subscriptions import wait_for
from tests.broker.geo.test_replication import receive_all

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


def test_nothing_crosses_a_partition_and_all_arrives_after_it_heals(regions: Regions) -> None:
    namespace = regions.replicated_namespace("acme/partition")
    topic = f"persistent://{namespace}/orders"
    state = regions.state
    assert any(p.role == "link-proxy" for p in state.processes), "cross-region traffic goes through proxies"
    east, west = regions.client("east"), regions.client("west")
    consumer = west.subscribe(topic, "audit")
    producer = east.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    assert receive_all(consumer, 1) == ["before"]  # replication flows through the links

    cut = partition_regions(cluster_dir=str(regions.directory))
    try:
        assert cut["links"]
        for i in range(20):
            producer.send(f"during-{i}".encode())  # acknowledged by east alone
        with pytest.raises(pulsar.Timeout):
            consumer.receive(3000)  # nothing crosses the cut
        # how far behind west is, as Pulsar's stats say it: the oldest unconfirmed message's age
        replication = regions.stats("east", topic)["replication"]["west"]
        assert replication["replicationBacklog"] == 20
        assert replication["replicationDelayInSeconds"] >= 2
    finally:
        heal_partition(cluster_dir=str(regions.directory))
    producer.send(b"after")
    got = receive_all(consumer, 21)
    assert got == [f"during-{i}" for i in range(20)] + ["after"]
    wait_for(lambda: regions.stats("east", topic)["replication"]["west"]["replicationDelayInSeconds"] == 0,
             "the replication delay to clear")  # fmt: skip
    for client in (east, west):
        client.close()


def test_a_cut_returns_once_every_link_proxy_has_cut(regions: Regions) -> None:
    """The proxies act on their signal when their event loop gets to it: the action waits for each
    to say so, or what an experiment does next can cross a cut that is not yet made."""
    proxy = next(p for p in regions.state.processes if p.role == "link-proxy")
    os.kill(proxy.pid, signal.SIGSTOP)  # it takes its signal only once it runs again
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        cutting = pool.submit(partition_regions, cluster_dir=str(regions.directory))
        try:
            with pytest.raises(concurrent.futures.TimeoutError):
                cutting.result(timeout=1)  # still waiting on the frozen proxy
        finally:
            os.kill(proxy.pid, signal.SIGCONT)
        try:
            assert proxy.name in cutting.result(timeout=30)["links"]
        finally:
            heal_partition(cluster_dir=str(regions.directory))
