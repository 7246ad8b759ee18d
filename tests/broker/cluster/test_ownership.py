"""The broker registry and bundle ownership against a real ZooKeeper, in process: what other
brokers see of a broker that leaves, and of one whose session expires."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from magnetar.broker.namespace import NamespacePolicies
from magnetar.broker.ownership import BrokerInfo, NotServedError, Ownership
from magnetar.common.metadata import MetadataStore, open_store

pytestmark = pytest.mark.zookeeper

Sessions = tuple[MetadataStore, MetadataStore]
NAMESPACE = "public/default"
BUNDLE = NamespacePolicies().bundles()[0]


def broker(port: int) -> BrokerInfo:
    return BrokerInfo(f"127.0.0.1:{port}", f"pulsar://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}", "r1")


@pytest.fixture
async def sessions(zk_url: str) -> AsyncIterator[Sessions]:
    """The leaving broker's session, and another broker's."""
    mine = await open_store(zk_url, session_timeout_s=4)
    other = await open_store(zk_url, session_timeout_s=4)
    yield mine, other
    await mine.close()
    await other.close()


async def listed(ownership: Ownership) -> list[str]:
    return [b.broker_id for b in await ownership.brokers()]


async def test_a_broker_that_left_is_never_listed_again(sessions: Sessions) -> None:
    mine, other = sessions
    leaving = Ownership(mine, broker(6650))
    observer = Ownership(other, broker(6660))
    await leaving.register()
    await leaving.acquire(NAMESPACE, BUNDLE)
    assert await listed(observer) == ["127.0.0.1:6650"]

    await leaving.unregister()  # a graceful shutdown begins
    await leaving.release(NAMESPACE, BUNDLE)  # ... and hands its bundles over
    await leaving.report()
    assert await listed(observer) == []
    assert await observer.owner(NAMESPACE, BUNDLE) is None
    with pytest.raises(NotServedError, match="shutting down"):
        await leaving.acquire(NAMESPACE, BUNDLE)
    assert await observer.owner(NAMESPACE, BUNDLE) is None

    await mine.close()  # and once its process is gone
    assert await listed(observer) == []
