"""The in-memory managed ledger of a non-persistent topic: entries held only until forgotten,
positions that keep growing across loads, cursors reading what is held, and nothing written to
the metadata store or a bookie."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from magnetar.broker.managed_ledger import InitialPosition, ManagedLedgerConfig
from magnetar.broker.non_persistent.memory_ledger import MemoryLedger, NotStoredError
from magnetar.common.metadata import MetadataStore, NoNodeError, open_store


@pytest.fixture
async def store(memory_url: str) -> AsyncIterator[MetadataStore]:
    store = await open_store(memory_url)
    yield store
    await store.close()


async def _ledger() -> MemoryLedger:
    ledger = MemoryLedger("public/default/non-persistent/t", ManagedLedgerConfig())
    await ledger.open()
    return ledger


async def test_entries_are_read_until_forgotten_and_nothing_is_stored(store: MetadataStore) -> None:
    ledger = await _ledger()
    cursor = ledger.new_non_durable_cursor(InitialPosition.LATEST)
    positions = [await ledger.add_entry(b"m%d" % i) for i in range(5)]
    assert [p.entry_id for p in positions] == [0, 1, 2, 3, 4]
    assert [e.data for e in await cursor.read_entries(10)] == [b"m%d" % i for i in range(5)]
    assert ledger.total_size == 10

    ledger.forget_through(positions[2])
    assert not ledger.has_entry(positions[2])
    assert ledger.has_entry(positions[3])
    assert await ledger.read_entry(positions[1]) is None
    assert [e.data for e in await ledger.read_positions(positions)] == [b"m3", b"m4"]
    assert ledger.first_position() == positions[3]
    assert ledger.total_size == 4
    late = ledger.new_non_durable_cursor(InitialPosition.EARLIEST)
    assert [e.data for e in await late.read_entries(10)] == [b"m3", b"m4"], "forgotten entries are gone"

    with pytest.raises(NoNodeError):
        await store.children("/managed-ledgers")
    await ledger.close()


async def test_positions_grow_across_loads() -> None:
    first = await _ledger()
    before = await first.add_entry(b"x")
    await first.close()
    await asyncio.sleep(0.002)
    again = await _ledger()
    assert await again.add_entry(b"y") > before, "a client never takes a new message for one it has seen"
    await again.close()


async def test_what_needs_storage_is_refused() -> None:
    ledger = await _ledger()
    with pytest.raises(NotStoredError, match="no durable cursor"):
        await ledger.open_cursor("s")
    with pytest.raises(NotStoredError, match="cannot be terminated"):
        await ledger.terminate()
    await ledger.set_property("pulsar.topic.epoch", "1")
    assert ledger.properties == {"pulsar.topic.epoch": "1"}
    await ledger.close()
