"""The metadata-store contract, run against every backend: memory, the sqlite file, and a real
ZooKeeper server. What one backend does, the others must do, or components would behave
differently in unit tests, `magnetar standalone` and a cluster."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

import pytest
from kazoo.protocol.serialization import Close, Connect, int_struct

from magnetar.common.metadata import (
    BadVersionError,
    EventType,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionState,
    WatchEvent,
    open_store,
)
from magnetar.common.metadata.memory import MemoryStore
from magnetar.common.metadata.paths import InvalidPathError
from magnetar.common.metadata.zookeeper import ZooKeeperStore


async def eventually(check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def expire(store: MetadataStore, url: str) -> None:
    """Expire the store's session from outside, as a server-side timeout would."""
    if isinstance(store, MemoryStore):
        store.expire_session()
        return
    assert isinstance(store, ZooKeeperStore)
    # ZooKeeper's own trick: a second client attaches to the session and closes it.
    session_id, password = store.client.client_id
    host, port = urlsplit(url).netloc.split(",")[0].rsplit(":", 1)
    deadline = asyncio.get_running_loop().time() + 15
    while not await asyncio.to_thread(_close_session, (host, int(port)), session_id, password):
        assert asyncio.get_running_loop().time() < deadline, f"session {session_id:#x} never closed"


def _close_session(address: tuple[str, int], session_id: int, password: bytes) -> bool:
    """Attach to the session and close it, both requests sent at once: attaching drops the
    owner's connection, and an owner that reconnected before a close sent after the attach's
    answer would take the session back (and drop this connection). True once the session is
    closed (or was gone already)."""
    attach = Connect(0, 0, 4000, session_id, password, False).serialize()
    close = int_struct.pack(1) + int_struct.pack(Close.type)
    answers = b""
    with socket.create_connection(address, timeout=10) as connection:
        connection.sendall(int_struct.pack(len(attach)) + attach + int_struct.pack(len(close)) + close)
        while chunk := connection.recv(4096):
            answers += chunk
    if len(answers) < 12:
        return False
    size: int = int_struct.unpack_from(answers)[0]
    timeout_ms: int = int_struct.unpack_from(answers, 8)[0]
    # the attach refused (a timeout of 0: the session had expired), or the close answered too
    return timeout_ms <= 0 or len(answers) > 4 + size


@pytest.fixture
async def stores(store_url: str) -> AsyncIterator[tuple[MetadataStore, MetadataStore]]:
    """Two sessions on one store, as two processes (or two components) would have."""
    first = await open_store(store_url, session_timeout_s=4)
    second = await open_store(store_url, session_timeout_s=4)
    yield first, second
    await first.close()
    await second.close()


async def test_create_get_and_versions(stores: tuple[MetadataStore, MetadataStore]) -> None:
    a, b = stores
    assert await a.create("/tenants/acme", b"v0") == "/tenants/acme"
    value, stat = await b.get("/tenants/acme")
    assert (value, stat.version, stat.ephemeral) == (b"v0", 0, False)
    with pytest.raises(NodeExistsError):
        await b.create("/tenants/acme", b"again")
    with pytest.raises(NoNodeError):
        await a.create("/missing/parent/node", make_parents=False)
    with pytest.raises(NoNodeError):
        await a.get("/nope")
    assert await a.exists("/nope") is None


async def test_compare_and_set(stores: tuple[MetadataStore, MetadataStore]) -> None:
    a, b = stores
    stat = await a.put("/cas", b"1")
    assert stat.version == 0
    assert (await b.put("/cas", b"2", expected_version=0)).version == 1
    with pytest.raises(BadVersionError):
        await a.put("/cas", b"lost update", expected_version=0)
    assert (await a.get("/cas"))[0] == b"2"
    with pytest.raises(NodeExistsError):
        await a.put("/cas", b"x", expected_version=-1)
    with pytest.raises(NoNodeError):
        await a.put("/absent", b"x", expected_version=3)
    assert (await a.put("/made/by/put", b"x", expected_version=-1)).version == 0


async def test_sequential_nodes_are_ordered(stores: tuple[MetadataStore, MetadataStore]) -> None:
    a, b = stores
    created = [await (a if i % 2 else b).create("/seq/id-", sequential=True) for i in range(5)]
    suffixes = [p.removeprefix("/seq/id-") for p in created]
    assert all(len(s) == 10 and s.isdigit() for s in suffixes)
    assert suffixes == sorted(suffixes)
    assert len(set(suffixes)) == 5
    assert await a.children("/seq") == sorted(p.rsplit("/", 1)[1] for p in created)


async def test_delete(stores: tuple[MetadataStore, MetadataStore]) -> None:
    a, _ = stores
    await a.create("/d/x/y", b"")
    with pytest.raises(NotEmptyError):
        await a.delete("/d")
    with pytest.raises(BadVersionError):
        await a.delete("/d/x/y", expected_version=7)
    await a.delete("/d", recursive=True)
    assert await a.exists("/d") is None
    with pytest.raises(NoNodeError):
        await a.delete("/d")


async def test_invalid_paths_are_rejected(stores: tuple[MetadataStore, MetadataStore]) -> None:
    a, _ = stores
    for bad in ("relative", "/trailing/", "/double//slash", "/dot/../x"):
        with pytest.raises(InvalidPathError):
            await a.create(bad)


async def test_watches_see_changes_from_other_sessions(stores: tuple[MetadataStore, MetadataStore]) -> None:
    a, b = stores
    seen: list[WatchEvent] = []
    await b.create("/w", b"")
    b.watch("/w/node", seen.append)
    b.watch("/w", seen.append, children=True)
    await b.exists("/w/node")  # a round trip: the watch is in place once it returns
    await b.children("/w")
    await a.create("/w/node", b"1")
    await eventually(lambda: WatchEvent(EventType.CREATED, "/w/node") in seen)
    await a.put("/w/node", b"2")
    await eventually(lambda: WatchEvent(EventType.CHANGED, "/w/node") in seen)
    await a.delete("/w/node")
    await eventually(lambda: WatchEvent(EventType.DELETED, "/w/node") in seen)
    assert WatchEvent(EventType.CHILDREN, "/w") in seen
    # Watches persist (ZooKeeper's fire once; the store re-arms them) until unwatched.
    await a.create("/w/node", b"3")
    await eventually(lambda: seen.count(WatchEvent(EventType.CREATED, "/w/node")) == 2)
    b.unwatch("/w/node", seen.append)
    before = len([e for e in seen if e.path == "/w/node"])
    await a.put("/w/node", b"4")
    await a.create("/w/other", b"")  # a later event to be sure the earlier one had its chance
    await eventually(lambda: seen.count(WatchEvent(EventType.CHILDREN, "/w")) >= 3)
    assert len([e for e in seen if e.path == "/w/node"]) == before


async def test_ephemerals_end_with_their_session(store_url: str) -> None:
    owner = await open_store(store_url, session_timeout_s=4)
    observer = await open_store(store_url)
    try:
        path = await owner.create("/live/bookie-1", b"x", ephemeral=True)
        assert (await observer.get(path))[1].ephemeral
        await owner.close()
        await eventually(lambda: True)
        assert await observer.exists(path) is None
    finally:
        await owner.close()
        await observer.close()


async def test_session_expiry_removes_ephemerals_and_session_renews(store_url: str) -> None:
    store = await open_store(store_url, session_timeout_s=4)
    observer = await open_store(store_url)
    states: list[SessionState] = []
    store.on_session_event(states.append)
    try:
        await store.create("/live/broker-1", b"x", ephemeral=True)
        await store.create("/durable", b"kept")
        old_session = store.session_id
        await expire(store, store_url)
        await eventually(lambda: SessionState.EXPIRED in states)
        await eventually(lambda: states[-1] is SessionState.CONNECTED)
        assert await observer.exists("/live/broker-1") is None
        assert (await observer.get("/durable"))[0] == b"kept"
        # The store carries on with a new session: new ephemerals work again.
        assert store.session_id != old_session
        await store.create("/live/broker-1", b"y", ephemeral=True)
        assert (await observer.get("/live/broker-1"))[0] == b"y"
    finally:
        await store.close()
        await observer.close()


async def test_reads_carry_on_across_a_session_expiry(store_url: str) -> None:
    """A read is not tied to a session: one that meets the expiry waits for the new session
    (a broker's lookups then answer instead of refusing clients while ZooKeeper comes back)."""
    store = await open_store(store_url, session_timeout_s=4)
    states: list[SessionState] = []
    store.on_session_event(states.append)
    failures: list[BaseException] = []
    reads = 0
    stop = asyncio.Event()

    async def keep_reading() -> None:
        nonlocal reads
        while not stop.is_set():
            try:
                assert (await store.get("/durable"))[0] == b"kept"
                assert await store.exists("/durable") is not None
                assert await store.children("/") != []
                reads += 1
            except Exception as exc:  # every failure is the finding
                failures.append(exc)
            await asyncio.sleep(0.002)

    try:
        await store.create("/durable", b"kept")
        readers = [asyncio.create_task(keep_reading()) for _ in range(4)]
        await asyncio.sleep(0.1)
        await expire(store, store_url)
        await eventually(lambda: SessionState.EXPIRED in states)
        await eventually(lambda: states[-1] is SessionState.CONNECTED)
        before = reads
        await eventually(lambda: reads > before + 10)
        stop.set()
        await asyncio.gather(*readers)
        assert failures == []
    finally:
        stop.set()
        await store.close()


async def test_leader_election(store_url: str) -> None:
    first = await open_store(store_url, session_timeout_s=4)
    second = await open_store(store_url, session_timeout_s=4)
    try:
        one = first.election("/leader", "broker-1")
        two = second.election("/leader", "broker-2")
        await one.campaign()
        assert one.is_leader
        waiting = asyncio.ensure_future(two.campaign())
        await asyncio.sleep(0.3)
        assert not waiting.done()
        assert not two.is_leader
        assert await two.leader() == "broker-1"
        await first.close()  # the leader's process goes away: its node with its session
        await asyncio.wait_for(waiting, 15)
        assert two.is_leader
        assert await two.leader() == "broker-2"
        await two.resign()
        assert not two.is_leader
        assert await two.leader() is None
    finally:
        await first.close()
        await second.close()


async def expire_and_renew(store: MetadataStore, url: str) -> None:
    """Expire the session and wait until the store has opened a new one."""
    states: list[SessionState] = []
    store.on_session_event(states.append)
    await expire(store, url)
    await eventually(lambda: SessionState.EXPIRED in states)
    await eventually(lambda: states[-1] is SessionState.CONNECTED)


async def test_a_participant_whose_session_expired_campaigns_again(store_url: str) -> None:
    first = await open_store(store_url, session_timeout_s=4)
    second = await open_store(store_url, session_timeout_s=4)
    try:
        one = first.election("/leader", "broker-1")
        two = second.election("/leader", "broker-2")
        await one.campaign()
        waiting = asyncio.ensure_future(two.campaign())
        await expire_and_renew(first, store_url)  # the leader's node goes with its session
        await asyncio.wait_for(waiting, 15)
        assert two.is_leader
        assert not one.is_leader
        # The expired participant is back in the election, next in line: it leads once the new
        # leader leaves, so the cluster is never left without a leader.
        await two.resign()
        await eventually(lambda: one.is_leader)
        assert await two.leader() == "broker-1"
        # A sole leader whose session expires leads again in its new session.
        await expire_and_renew(first, store_url)
        await eventually(lambda: one.is_leader)
        assert await two.leader() == "broker-1"
    finally:
        await first.close()
        await second.close()


async def test_sqlite_store_survives_a_restart(sqlite_url: str) -> None:
    store = await open_store(sqlite_url)
    await store.put("/topics/t1", b"cursor=5")
    await store.create("/live/me", b"", ephemeral=True)
    first = await store.create("/ids/L", sequential=True)
    await store.close()
    store = await open_store(sqlite_url)
    try:
        value, stat = await store.get("/topics/t1")
        assert (value, stat.version) == (b"cursor=5", 0)
        assert await store.exists("/live/me") is None
        # The sequence counter persists too: ids never repeat after a restart.
        assert await store.create("/ids/L", sequential=True) > first
    finally:
        await store.close()


async def test_unknown_store_url_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown metadata store URL"):
        await open_store("etcd://127.0.0.1:2379")
