"""A read cache answers from what it kept until the node changes, on every backend: a change by
another session, a creation, a deletion and a session event all make the next read go to the
store, and nothing stale is answered once the change has been seen."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from magnetar.common.metadata import MetadataStore, NoNodeError, open_store
from magnetar.common.metadata.cache import ReadCache
from magnetar.common.metadata.zookeeper import ZooKeeperStore


class CountingStore:
    """Counts the reads that reach the store."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.reads = 0
        real = store.get

        async def get(path: str) -> tuple[bytes, object]:
            self.reads += 1
            return await real(path)

        store.get = get  # type: ignore[method-assign,assignment]


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the change was never seen")
        await asyncio.sleep(0.02)


async def reads_as(cache: ReadCache, path: str, expected: bytes | None) -> bool:
    """Whether the cache now answers ``expected`` (None: that the node does not exist)."""
    try:
        return await cache.get(path) == expected
    except NoNodeError:
        return expected is None


@pytest.fixture
async def two(store_url: str) -> AsyncIterator[tuple[ReadCache, CountingStore, MetadataStore]]:
    mine = await open_store(store_url, session_timeout_s=4)
    other = await open_store(store_url, session_timeout_s=4)
    counting = CountingStore(mine)
    cache = ReadCache(mine)
    yield cache, counting, other
    cache.close()
    await mine.close()
    await other.close()


async def test_reads_are_kept_until_another_session_changes_the_node(
    two: tuple[ReadCache, CountingStore, MetadataStore],
) -> None:
    cache, counting, other = two
    await other.create("/policies", b"v1")
    assert await cache.get("/policies") == b"v1"
    reads = counting.reads
    assert [await cache.get("/policies") for _ in range(10)] == [b"v1"] * 10
    assert counting.reads == reads  # answered from what was kept

    await other.put("/policies", b"v2")
    await eventually(lambda: reads_as(cache, "/policies", b"v2"))

    await other.delete("/policies")
    await eventually(lambda: reads_as(cache, "/policies", None))


async def test_a_missing_node_is_kept_missing_until_it_is_created(
    two: tuple[ReadCache, CountingStore, MetadataStore],
) -> None:
    cache, counting, other = two
    for _ in range(3):
        with pytest.raises(NoNodeError):
            await cache.get("/later")
    assert counting.reads == 1
    await other.create("/later", b"here")
    await eventually(lambda: reads_as(cache, "/later", b"here"))


async def test_a_writer_in_this_process_reads_its_own_write_at_once(
    two: tuple[ReadCache, CountingStore, MetadataStore],
) -> None:
    cache, counting, _ = two
    await counting.store.create("/mine", b"a")
    assert await cache.get("/mine") == b"a"
    await counting.store.put("/mine", b"b")
    cache.drop("/mine")  # as the writer does right after its write, before any watch fires
    assert await cache.get("/mine") == b"b"


async def test_children_of_a_node_created_while_its_watch_was_armed_are_seen(zk_url: str) -> None:
    # ZooKeeper sets no children watch on a missing node, so the store waits for the node with an
    # exists watch. Here the node and a child are made between the two, as a fresh cluster's first
    # bookie registers while a broker reads the writable bookies: the cache must still see the
    # children that come later, not keep "no such node" or the first listing for good.
    mine = await open_store(zk_url, session_timeout_s=4)
    other = await open_store(zk_url, session_timeout_s=4)
    assert isinstance(mine, ZooKeeperStore)
    assert isinstance(other, ZooKeeperStore)
    kazoo = mine.client
    exists_async = kazoo.exists_async

    made: list[str] = []

    def created_first(path: str, watch: object = None) -> object:
        if path == "/bookies" and not made:
            made.append(other.client.create("/bookies/first", b"", makepath=True))
        return exists_async(path, watch=watch)

    kazoo.exists_async = created_first
    cache = ReadCache(mine)
    try:
        with contextlib.suppress(NoNodeError):  # the first listing may come before the node
            await cache.children("/bookies")
        await other.create("/bookies/second", b"")

        async def both() -> bool:
            try:
                return sorted(await cache.children("/bookies")) == ["first", "second"]
            except NoNodeError:
                return False

        await eventually(both)
    finally:
        cache.close()
        await mine.close()
        await other.close()
