"""The bookie's services around storage: registration in the metadata store (and its moves with
read-only mode and session expiry), the disk monitor, and garbage collection of deleted ledgers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.bookie.disk_monitor import DiskMonitor
from magnetar.bookie.gc import GarbageCollector
from magnetar.bookie.layout import READONLY_BOOKIES, WRITABLE_BOOKIES, BookieRegistration
from magnetar.bookie.registration import Registration
from magnetar.common.metadata import open_store
from magnetar.common.metadata.memory import MemoryStore
from magnetar.proto import bookie_pb2 as pb
from tests.bookie.helpers import entry, reason_of, running


async def eventually(check: Callable[[], object], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():  # type: ignore[misc]
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_running_bookie_registers_with_its_address(tmp_path: Path, memory_url: str) -> None:
    async with running(tmp_path, metadata_service_uri=memory_url) as (server, _):
        store = await open_store(memory_url)
        value, stat = await store.get(f"{WRITABLE_BOOKIES}/{server.bookie_id}")
        assert stat.ephemeral
        assert BookieRegistration.decode(value).address == server.address
    # Stopped: unregistered at once, so no client picks it any more.
    assert await store.children(WRITABLE_BOOKIES) == []
    await store.close()


async def test_registration_follows_read_only_mode_and_session_expiry(memory_url: str) -> None:
    store = await open_store(memory_url)
    assert isinstance(store, MemoryStore)
    observer = await open_store(memory_url)
    registration = Registration(store, BookieRegistration("b1", "127.0.0.1:1"), read_only=False)
    await registration.start()
    assert await observer.children(WRITABLE_BOOKIES) == ["b1"]

    registration.set_read_only(True)

    async def children(path: str) -> list[str]:
        return await observer.children(path) if await observer.exists(path) else []

    async def moved() -> bool:
        return await children(READONLY_BOOKIES) == ["b1"] and not await children(WRITABLE_BOOKIES)

    await eventually(moved)
    store.expire_session()  # the ephemeral dies with the session...

    async def back() -> bool:
        return await children(READONLY_BOOKIES) == ["b1"]

    await eventually(back)  # ...and is created again on the new one
    await registration.stop()
    await store.close()
    await observer.close()


async def test_disk_monitor_goes_read_only_past_threshold_and_back_below_lwm(tmp_path: Path) -> None:
    usage = {"value": 0.5}
    async with running(tmp_path, disk_usage_threshold=0.95, disk_usage_lwm_threshold=0.90) as (
        server,
        client,
    ):
        monitor = DiskMonitor(server.bookie, on_full=lambda: None, probe=lambda _path: usage["value"])
        usage["value"] = 0.97
        await monitor.check()
        assert server.bookie.read_only
        (refused,) = await client.add(entry(1, 0))
        assert refused.reason == pb.BOOKIE_READ_ONLY
        usage["value"] = 0.92  # between the watermarks: no flapping
        await monitor.check()
        assert server.bookie.read_only
        usage["value"] = 0.85
        await monitor.check()
        assert not server.bookie.read_only


async def test_disk_monitor_shuts_down_when_read_only_mode_is_disabled(tmp_path: Path) -> None:
    stopped: list[bool] = []
    async with running(tmp_path, read_only_mode_enabled=False) as (server, _):
        monitor = DiskMonitor(server.bookie, on_full=lambda: stopped.append(True), probe=lambda _path: 0.99)
        await monitor.check()
        assert stopped == [True]


async def test_gc_drops_ledgers_deleted_from_metadata_and_keeps_live_ones(
    tmp_path: Path, memory_url: str
) -> None:
    async with running(tmp_path, metadata_service_uri=memory_url) as (server, client):
        store = await open_store(memory_url)
        ledgers = LedgerClient(store, LedgerClientConfig(ensemble_size=1, write_quorum=1, ack_quorum=1))
        doomed = await ledgers.create_ledger()
        kept = await ledgers.create_ledger()
        for i in range(20):
            await doomed.add_entry(b"gone %d" % i)
            await kept.add_entry(b"kept %d" % i)
        await doomed.close()
        await kept.close()
        await ledgers.delete_ledger(doomed.ledger_id)

        collector = GarbageCollector(store, server.bookie.storage, interval_ms=60_000)
        assert await collector.collect() == [doomed.ledger_id]
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await client.read(doomed.ledger_id, 0)
        assert reason_of(gone.value) == "NO_SUCH_LEDGER"
        assert (await client.read(kept.ledger_id, 19)).entry.payload == b"kept 19"
        await ledgers.close()
        await store.close()
