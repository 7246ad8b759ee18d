"""Writes made together go to ZooKeeper as multi requests; each caller still gets the answer it
would have had alone (real ZooKeeper)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from magnetar.common.metadata import (
    BadVersionError,
    MetadataError,
    NodeExistsError,
    NoNodeError,
    open_store,
)
from magnetar.common.metadata.zookeeper import ZooKeeperStore

pytestmark = pytest.mark.zookeeper


@pytest.fixture
async def store(zk_url: str) -> AsyncIterator[ZooKeeperStore]:
    opened = await open_store(zk_url)
    assert isinstance(opened, ZooKeeperStore)
    yield opened
    await opened.close()


def count_requests(store: ZooKeeperStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The type of every request kazoo is given from now on (what goes on the wire)."""
    sent: list[str] = []
    real = store.client._call

    def counted(request: Any, async_object: Any) -> Any:
        sent.append(type(request).__name__)
        return real(request, async_object)

    monkeypatch.setattr(store.client, "_call", counted)
    return sent


async def test_writes_made_together_are_one_request(
    store: ZooKeeperStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle of a thousand topics moving makes some fifteen writes a topic on one session."""
    await store.create("/topics", b"")
    sent = count_requests(store, monkeypatch)
    created = await asyncio.gather(*(store.create(f"/topics/t{i}", f"v{i}".encode()) for i in range(300)))
    assert created == [f"/topics/t{i}" for i in range(300)]
    stats = await asyncio.gather(*(store.put(f"/topics/t{i}", b"w", expected_version=0) for i in range(300)))
    assert {s.version for s in stats} == {1}
    await asyncio.gather(*(store.delete(f"/topics/t{i}") for i in range(0, 300, 2)))
    assert len(sent) <= 6, sent
    monkeypatch.undo()
    assert await store.children("/topics") == sorted(f"t{i}" for i in range(1, 300, 2))
    assert await store.get("/topics/t1") == (b"w", (await store.get("/topics/t1"))[1])


async def test_a_write_that_fails_fails_alone(store: ZooKeeperStore) -> None:
    """A multi is atomic: one conflict would undo the others' writes, so they are made again."""
    await store.create("/taken", b"x")
    await store.create("/cas", b"0")
    outcomes = await asyncio.gather(
        store.create("/new-1", b"1"),
        store.create("/taken", b"y"),
        store.put("/cas", b"1", expected_version=7),
        store.create("/deep/parents/made", b"p"),  # a parent missing: made, as alone
        store.create("/seq-", b"", sequential=True),
        store.create("/seq-", b"", sequential=True),
        store.delete("/absent"),
        store.create("/new-2", b"2"),
        return_exceptions=True,
    )
    assert outcomes[0] == "/new-1"
    assert isinstance(outcomes[1], NodeExistsError)
    assert isinstance(outcomes[2], BadVersionError)
    assert outcomes[3] == "/deep/parents/made"
    assert isinstance(outcomes[4], str)
    assert isinstance(outcomes[5], str)
    assert outcomes[4].startswith("/seq-")
    assert outcomes[5].startswith("/seq-")
    assert outcomes[4] != outcomes[5]
    assert isinstance(outcomes[6], NoNodeError)
    assert outcomes[7] == "/new-2"
    assert (await store.get("/taken"))[0] == b"x"
    assert (await store.get("/cas"))[0] == b"0"
    assert (await store.get("/new-2"))[0] == b"2"
    assert (await store.get("/deep/parents/made"))[0] == b"p"


async def test_a_batch_in_flight_when_the_store_closes_fails_its_callers(zk_url: str) -> None:
    store = await open_store(zk_url)
    assert isinstance(store, ZooKeeperStore)
    client: KazooClient = store.client
    writes = [asyncio.ensure_future(store.create(f"/n{i}", b"")) for i in range(10)]
    await asyncio.sleep(0)  # queued, not sent yet
    await store.close()
    for write in writes:
        with pytest.raises(MetadataError):
            await asyncio.wait_for(write, 10)
    assert not client.connected


async def test_a_failed_multi_goes_again_in_a_few_requests_not_one_per_write(
    store: ZooKeeperStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic's first cursor (its parent missing) among a bundle's other writes: the multi fails
    on it, the others go again together, and the cursor alone, its parents made."""
    await store.create("/topics", b"")
    sent = count_requests(store, monkeypatch)
    wanted = [f"/topics/t{i}" for i in range(100)] + ["/topics/new/cursors/sub"]
    wanted += [f"/topics/u{i}" for i in range(100)]
    created = await asyncio.gather(*(store.create(path, b"v") for path in wanted))
    assert created == wanted
    # the multi, the 100 before again, the cursor (refused, its two parents, again), the 100 after
    assert sent.count("Transaction") == 3, sent
    assert len(sent) <= 10, sent
    monkeypatch.undo()
    assert len(await store.children("/topics")) == 201


async def test_the_writes_of_a_failed_multi_keep_their_order(store: ZooKeeperStore) -> None:
    """Made again, the writes around the failed one are applied in the order they were made."""
    outcomes = await asyncio.gather(
        store.create("/x", b"0"),
        store.create("/x", b"again"),  # fails: the write before made it
        store.put("/x", b"1", expected_version=0),  # after both: the node the first write made
        return_exceptions=True,
    )
    assert outcomes[0] == "/x"
    assert isinstance(outcomes[1], NodeExistsError)
    assert not isinstance(outcomes[2], BaseException)
    assert outcomes[2].version == 1
    assert (await store.get("/x"))[0] == b"1"
