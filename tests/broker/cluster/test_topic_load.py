"""Loading a topic on an in-process broker (memory metadata store, two in-process bookies): what
it reads from the configuration store."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.namespace import NamespacePolicies
from magnetar.broker.service import BrokerService
from tests.broker.conftest import Storage


@pytest.fixture
async def broker(storage: Storage) -> AsyncIterator[BrokerService]:
    service = BrokerService(
        BrokerConfig(metadata_store_url=storage.url, broker_service_port=0, web_service_port=0)
    )
    await service.start()
    yield service
    await service.stop()


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
    url, redirect = await broker.lookup(name, authoritative=True)
    assert (url, redirect) == (broker.service_url, False)
    readers.clear()
    topic = await broker.topic(name)
    assert str(topic.name) == name
    # The replication manager reads its own copy (broker/replication); the broker reads once.
    assert readers.count("magnetar.broker.service") == 1
    assert await broker.topic(name) is topic
    assert readers.count("magnetar.broker.service") == 1
