"""Managed ledgers and cursors over real (in-process) bookies and the metadata store."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.managed_ledger import (
    InitialPosition,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFactory,
    Position,
)
from tests.broker.conftest import Storage


def data(i: int) -> bytes:
    return f"message-{i}".encode()


async def test_adds_complete_in_order_and_read_back_untouched(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client)
    ledger = await factory.open("t/ns/persistent/a")
    positions = await asyncio.gather(*(ledger.add_entry(data(i)) for i in range(200)))
    assert positions == sorted(positions)
    assert len(set(positions)) == 200
    entries = await ledger.read_entries(ledger.first_position(), 500)
    assert [e.data for e in entries] == [data(i) for i in range(200)]
    await factory.close()


async def test_ledgers_roll_and_reads_cross_them(storage: Storage) -> None:
    config = ManagedLedgerConfig(max_entries_per_ledger=30, min_ledger_rollover_time_minutes=0)
    factory = ManagedLedgerFactory(storage.store, storage.client, config)
    ledger = await factory.open("t/ns/persistent/roll")
    for i in range(100):
        await ledger.add_entry(data(i))
    assert len(ledger.ledgers) >= 4
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    got = []
    while batch := await cursor.read_entries(17):
        got += batch
    assert [e.data for e in got] == [data(i) for i in range(100)]
    assert cursor.number_of_entries_in_backlog == 100
    await factory.close()


async def test_cursor_state_survives_a_restart(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client)
    ledger = await factory.open("t/ns/persistent/acks")
    positions = [await ledger.add_entry(data(i)) for i in range(20)]
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    await cursor.read_entries(20)
    await cursor.mark_delete(positions[4])  # 0..4 cumulatively
    await cursor.delete([positions[7], positions[9], positions[5]])  # 5 collapses into mark-delete
    assert cursor.mark_delete_position == positions[5]
    assert cursor.number_of_entries_in_backlog == 20 - 6 - 2
    await factory.close()

    store, client = await storage.new_client()
    reopened = await ManagedLedgerFactory(store, client).open("t/ns/persistent/acks")
    again = reopened.cursors["sub"]
    assert again.mark_delete_position == positions[5]
    redelivered = await again.read_entries(100)
    expected = [data(i) for i in range(6, 20) if i not in (7, 9)]
    assert [e.data for e in redelivered] == expected
    await reopened.close()
    await client.close()
    await store.close()


async def test_reopening_fences_the_previous_owner(storage: Storage) -> None:
    first = await ManagedLedgerFactory(storage.store, storage.client).open("t/ns/persistent/fence")
    for i in range(5):
        await first.add_entry(data(i))
    store, client = await storage.new_client()
    second = await ManagedLedgerFactory(store, client).open("t/ns/persistent/fence")
    with pytest.raises(ManagedLedgerError):
        await first.add_entry(b"from the deposed owner")
    await second.add_entry(data(5))
    cursor = await second.open_cursor("sub", InitialPosition.EARLIEST)
    assert [e.data for e in await cursor.read_entries(10)] == [data(i) for i in range(6)]
    await second.close()
    await client.close()
    await store.close()


async def test_consumed_ledgers_are_deleted_and_needed_ones_kept(storage: Storage) -> None:
    config = ManagedLedgerConfig(max_entries_per_ledger=10, min_ledger_rollover_time_minutes=0)
    factory = ManagedLedgerFactory(storage.store, storage.client, config)
    ledger = await factory.open("t/ns/persistent/retention")
    fast = await ledger.open_cursor("fast", InitialPosition.EARLIEST)
    slow = await ledger.open_cursor("slow", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(35)]
    first_ledger = positions[0].ledger_id
    await fast.mark_delete(positions[-1])
    await slow.mark_delete(positions[12])  # still needs the second ledger
    await ledger.trim()
    ids = [i.ledger_id for i in ledger.ledgers]
    assert first_ledger not in ids
    assert positions[13].ledger_id in ids
    assert first_ledger not in await storage.client.ledger_ids()
    assert [e.data for e in await slow.read_entries(100)] == [data(i) for i in range(13, 35)]
    await factory.close()


async def test_seek_and_find_by_predicate(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client)
    ledger = await factory.open("t/ns/persistent/seek")
    positions = [await ledger.add_entry(data(i)) for i in range(50)]
    found = await ledger.find_first_position(lambda e: int(e.data.split(b"-")[1]) >= 31)
    assert found == positions[31]
    cursor = await ledger.open_cursor("sub", InitialPosition.LATEST)
    assert await cursor.read_entries(10) == []
    await cursor.seek(positions[45])
    assert [e.data for e in await cursor.read_entries(10)] == [data(i) for i in range(45, 50)]
    reader = ledger.new_non_durable_cursor(Position(positions[47].ledger_id, positions[47].entry_id))
    assert [e.data for e in await reader.read_entries(10)] == [data(48), data(49)]
    await factory.close()
