"""Loading a topic on an in-process broker (memory metadata store, two in-process bookies): what
it reads from the configuration store, and how a transfer's destination holds early clients."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

import pytest

from magnetar.admin.client import AsyncAdminClient
from magnetar.broker.config import BrokerConfig
from magnetar.broker.loadbalance.bundles import Bundles
from magnetar.broker.namespace import Bundle, NamespacePolicies
from magnetar.broker.ownership import BrokerInfo, LookupUrls, NotServedError, Ownership
from magnetar.broker.policies.data import ROOT as POLICIES_ROOT
from magnetar.broker.policies.data import TopicPolicyStore
from magnetar.broker.service import BrokerService
from magnetar.broker.topic import Topic, TopicName
from magnetar.broker.topic_loader import WritableOpener
from magnetar.common.metadata import Stat
from tests.broker.conftest import Storage


@pytest.fixture
async def broker(storage: Storage) -> AsyncIterator[BrokerService]:
    service = BrokerService(
        BrokerConfig(metadata_store_url=storage.url, broker_service_port=0, web_service_port=0)
    )
    await service.start()
    yield service
    await service.stop()


def bundles(broker: BrokerService) -> Bundles:
    assert broker.bundles is not None
    return broker.bundles


async def load(broker: BrokerService, name: str) -> Topic:
    assert broker.topics is not None
    return await broker.topics.get_or_load(name)


async def test_loading_a_topic_reads_the_namespace_policies_once(
    broker: BrokerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every read is a round trip to the configuration store (ZooKeeper, often in another
    region) on the path of a client's first PRODUCER or SUBSCRIBE."""
    assert broker.namespaces is not None
    read = broker.namespaces.policies
    readers: list[str] = []

    async def counted(namespace: str) -> NamespacePolicies:
        readers.append(sys._getframe(1).f_globals["__name__"])
        return await read(namespace)

    monkeypatch.setattr(broker.namespaces, "policies", counted)
    name = "persistent://public/default/loaded-once"
    urls, redirect = await bundles(broker).lookup(name, authoritative=True)
    assert (urls.url, redirect) == (broker.service_url, False)
    readers.clear()
    topic = await load(broker, name)
    assert str(topic.name) == name
    # The replication manager reads its own copy (broker/replication); the bundles read once.
    assert readers.count("magnetar.broker.loadbalance.bundles") == 1
    assert await load(broker, name) is topic
    assert readers.count("magnetar.broker.loadbalance.bundles") == 1


async def test_a_client_sent_ahead_of_a_handover_waits_for_it(broker: BrokerService) -> None:
    """A transfer sends clients to the destination before it owns the bundle (so they reconnect
    while the handover runs): their PRODUCER and SUBSCRIBE wait there instead of being refused,
    which would make the client back off and look the topic up again."""
    name = "persistent://public/default/handed-over"
    namespace, bundle = await bundles(broker).bundle_of(TopicName.parse(name))
    bundles(broker).gate.expect_handover([name])
    # A client that looks the topic up meanwhile is kept here too, not sent elsewhere.
    assert await bundles(broker).lookup(name) == (
        LookupUrls(broker.service_url, http_url=broker.web_service_url),
        False,
    )
    assert broker.ownership is not None
    assert await broker.ownership.owner(namespace, bundle) is None, "the lookup took the bundle itself"
    early = asyncio.ensure_future(load(broker, name))
    await asyncio.sleep(0.2)
    assert not early.done(), "refused instead of waiting for the handover"
    await bundles(broker).acquire_and_load(namespace, bundle, [name])
    topic = await asyncio.wait_for(early, 10)
    assert str(topic.name) == name


async def test_clients_held_for_a_handover_that_fails_are_refused(
    broker: BrokerService, storage: Storage
) -> None:
    name = "persistent://public/default/never-handed-over"
    namespace, bundle = await bundles(broker).bundle_of(TopicName.parse(name))
    other = Ownership(
        storage.store, BrokerInfo("127.0.0.1:1", "pulsar://127.0.0.1:1", "http://127.0.0.1:2", "x")
    )
    await other.acquire(namespace, bundle)  # another broker took the bundle meanwhile
    bundles(broker).gate.expect_handover([name])
    early = asyncio.ensure_future(load(broker, name))
    with pytest.raises(NotServedError):
        await bundles(broker).acquire_and_load(namespace, bundle, [name])
    with pytest.raises(NotServedError):
        await asyncio.wait_for(early, 10)


async def test_topic_policies_cost_a_read_only_for_topics_that_set_some(
    broker: BrokerService, storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle of a thousand topics moving read each topic's policy node at every load, and
    again at every producer's schema check: most topics set none. A policy set through another
    broker (its own session) still applies at the next load."""
    assert broker.configuration_store is not None
    store = broker.configuration_store
    read = store.get
    reads: list[str] = []

    async def counted(path: str) -> tuple[bytes, Stat]:
        reads.append(path)
        return await read(path)

    monkeypatch.setattr(store, "get", counted)
    names = [f"persistent://public/default/policies-{i}" for i in range(20)]
    for name in names:
        await bundles(broker).lookup(name, authoritative=True)
        await load(broker, name)
    assert broker.policies is not None
    for name in names:
        assert (await broker.policies.resolved(name)).maxProducers == 0  # the default: no limit
    assert [p for p in reads if p.startswith(POLICIES_ROOT)] == []
    # Another broker sets a topic's policy: this one sees it at the topic's next load.
    folder = POLICIES_ROOT + "/public/default/persistent"
    listed_again = asyncio.Event()
    store.watch(folder, lambda _event: listed_again.set(), children=True)  # after the cache's watch
    other_store, other_client = await storage.new_client()
    try:
        await TopicPolicyStore(other_store).update(names[3], {"maxProducers": 2})
        await asyncio.wait_for(listed_again.wait(), 10)
        assert broker.topics is not None
        await broker.topics.evict([await load(broker, names[3])])
        reloaded = await load(broker, names[3])
        assert reloaded.settings.own.maxProducers == 2
        assert (await broker.policies.resolved(names[3])).maxProducers == 2
        assert (await broker.policies.resolved(names[4])).maxProducers == 0
    finally:
        await other_client.close()
        await other_store.close()


async def test_an_unloaded_bundle_of_many_topics_serves_again_loading_them_side_by_side_within_the_bound(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pulsar's maxConcurrentTopicLoadRequest: the clients of an unloaded bundle all come back at
    once, and their topics load side by side (not one after another), at most that many at a
    time; each serves again, on a new ledger after the one the unload closed."""
    service = BrokerService(
        BrokerConfig(
            metadata_store_url=storage.url,
            broker_service_port=0,
            web_service_port=0,
            max_concurrent_topic_load_request=4,
        )
    )
    await service.start()
    try:
        assert service.topics is not None
        names = [f"persistent://public/default/many-{i}" for i in range(40)]
        for name in names:
            await bundles(service).lookup(name, authoritative=True)
        before = await asyncio.gather(*(load(service, name) for name in names))
        for topic in before:
            await topic.ledger.add_entry(b"before")
        for namespace, bundle in bundles(service).owned():
            if namespace == "public/default":
                await bundles(service).unload(namespace, bundle)
        assert [n for n in names if service.topics.get(n) is not None] == []
        in_flight, most = 0, 0
        real_open = WritableOpener.open

        async def counted(opener: WritableOpener, name: TopicName, policies: NamespacePolicies) -> Topic:
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            try:
                await asyncio.sleep(0)  # every open waits on the store at least once
                return await real_open(opener, name, policies)
            finally:
                in_flight -= 1

        monkeypatch.setattr(WritableOpener, "open", counted)
        for name in names:
            await bundles(service).lookup(name, authoritative=True)
        after = await asyncio.gather(*(load(service, name) for name in names))
        assert most == 4
        for old, new in zip(before, after, strict=True):
            assert new is not old
            position = await new.ledger.add_entry(b"after")
            assert position.ledger_id > old.ledger.ledgers[-1].ledger_id
            assert [e.data for e in await new.ledger.read_entries(new.ledger.first_position(), 10)] == [
                b"before",
                b"after",
            ]
    finally:
        await service.stop()


async def test_a_namespace_unload_unloads_its_bundles_side_by_side(
    broker: BrokerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pulsar unloads a namespace's bundles at once: one after another, the clients of the first
    ones came back while the last ones were still closing (a namespace of 5,000 topics in 16
    bundles took 27 s)."""
    namespace = "public/default"
    by_bundle: dict[str, str] = {}
    for i in range(200):
        name = f"persistent://{namespace}/spread-{i}"
        by_bundle.setdefault((await bundles(broker).bundle_of(TopicName.parse(name)))[1].name, name)
    assert len(by_bundle) == 4  # the default bundle count
    for name in by_bundle.values():
        await bundles(broker).lookup(name, authoritative=True)
        await load(broker, name)
    in_flight, most = 0, 0
    real_unload = Bundles.unload

    async def counted(self: Bundles, ns: str, bundle: Bundle) -> list[str]:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            await asyncio.sleep(0)  # an unload waits on its topics' closes at least once
            return await real_unload(self, ns, bundle)
        finally:
            in_flight -= 1

    monkeypatch.setattr(Bundles, "unload", counted)
    await AsyncAdminClient(broker.web_service_url).request("PUT", f"/admin/v2/namespaces/{namespace}/unload")
    assert most == 4
    assert broker.topics is not None
    assert [n for n in by_bundle.values() if broker.topics.get(n) is not None] == []
    assert [b for b in bundles(broker).owned() if b[0] == namespace] == []
