"""Cursors: initial positions, reading, cumulative and individual acks, backlog, rewind, seek."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from magnetar.broker.managed_ledger import (
    InitialPosition,
    ManagedLedger,
    ManagedLedgerClosedError,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    Position,
)
from tests.broker.managed_ledger.conftest import Storage


def data(i: int) -> bytes:
    return f"message-{i}".encode()


KEEP = {"retention_time_minutes": -1, "retention_size_mb": -1}  # nothing trimmed unless a test says
TRIM = {"retention_time_minutes": 0, "retention_size_mb": 0}


@pytest.fixture
async def ledger(storage: Storage) -> AsyncIterator[ManagedLedger]:
    config = ManagedLedgerConfig(max_entries_per_ledger=10, min_ledger_rollover_time_minutes=0, **KEEP)
    factory = ManagedLedgerFactory(storage.store, storage.client, config)
    yield await factory.open("t/ns/persistent/cursors")
    await factory.close()


async def fill(ledger: ManagedLedger, count: int, start: int = 0) -> list[Position]:
    return [await ledger.add_entry(data(i)) for i in range(start, start + count)]


async def test_initial_positions_latest_and_earliest(ledger: ManagedLedger) -> None:
    await fill(ledger, 5)
    latest = await ledger.open_cursor("latest", InitialPosition.LATEST)
    earliest = await ledger.open_cursor("earliest", InitialPosition.EARLIEST)
    assert await latest.read_entries(10) == []
    assert latest.number_of_entries_in_backlog == 0
    assert earliest.number_of_entries_in_backlog == 5
    await fill(ledger, 3, start=5)
    assert [e.data for e in await latest.read_entries(10)] == [data(5), data(6), data(7)]
    assert [e.data for e in await earliest.read_entries(10)] == [data(i) for i in range(8)]
    assert await ledger.open_cursor("latest", InitialPosition.EARLIEST) is latest  # existing: as it was
    assert set(ledger.cursors) == {"latest", "earliest"}


async def test_cursor_on_an_empty_ledger_reads_the_first_entry(ledger: ManagedLedger) -> None:
    latest = await ledger.open_cursor("sub", InitialPosition.LATEST)
    assert not latest.has_more_entries()
    await fill(ledger, 1)
    assert latest.has_more_entries()
    assert [e.data for e in await latest.read_entries(10)] == [data(0)]


async def test_individual_acks_form_ranges_that_collapse_into_mark_delete(ledger: ManagedLedger) -> None:
    positions = await fill(ledger, 25)  # three ledgers
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    await cursor.read_entries(25)
    await cursor.mark_delete(positions[4])  # 0..4
    await cursor.delete([positions[i] for i in (7, 8, 9, 10, 12)])
    assert cursor.mark_delete_position == positions[4]
    assert cursor.individually_deleted_ranges == [
        (positions[7], positions[10]),
        (positions[12], positions[12]),
    ]
    assert cursor.number_of_entries_in_backlog == 25 - 5 - 5
    assert cursor.is_acknowledged(positions[9])
    assert not cursor.is_acknowledged(positions[11])
    await cursor.delete([positions[6], positions[5]])  # fills the gap up to 10
    assert cursor.mark_delete_position == positions[10]
    assert cursor.individually_deleted_ranges == [(positions[12], positions[12])]
    await cursor.delete([positions[11]])
    assert cursor.mark_delete_position == positions[12]
    assert cursor.individually_deleted_ranges == []
    assert cursor.number_of_entries_in_backlog == 12


async def test_cumulative_ack_clears_individual_acks_before_it(ledger: ManagedLedger) -> None:
    positions = await fill(ledger, 10)
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    await cursor.delete([positions[3], positions[6], positions[8]])
    await cursor.mark_delete(positions[6])
    assert cursor.individually_deleted_ranges == [(positions[8], positions[8])]
    await cursor.mark_delete(positions[2])  # behind: no effect
    assert cursor.mark_delete_position == positions[6]
    await cursor.mark_delete(Position(positions[-1].ledger_id + 100, 0))  # past the end: ignored
    assert cursor.mark_delete_position == positions[6]
    assert cursor.number_of_entries_in_backlog == 2


async def test_reads_skip_acknowledged_entries_and_rewind_redelivers_the_rest(ledger: ManagedLedger) -> None:
    positions = await fill(ledger, 12)
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    await cursor.delete([positions[i] for i in (1, 2, 3, 9, 10)])
    assert [e.data for e in await cursor.read_entries(4)] == [data(i) for i in (0, 4, 5, 6)]
    assert [e.data for e in await cursor.read_entries(100)] == [data(i) for i in (7, 8, 11)]
    assert await cursor.read_entries(100) == []
    await cursor.delete([positions[5], positions[7]])
    cursor.rewind()
    assert [e.data for e in await cursor.read_entries(100)] == [data(i) for i in (0, 4, 6, 8, 11)]
    # Redelivery of given positions leaves out what was acknowledged meanwhile.
    await cursor.delete([positions[4]])
    replayed = await cursor.replay([positions[i] for i in (11, 4, 0, 6, 9)])
    assert [e.data for e in replayed] == [data(0), data(6), data(11)]


async def test_seek_resets_acks_and_read_position(ledger: ManagedLedger) -> None:
    positions = await fill(ledger, 30)
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    await cursor.mark_delete(positions[20])
    await cursor.delete([positions[25]])
    await cursor.seek(positions[15])  # back: 15.. are unacknowledged again
    assert cursor.mark_delete_position == positions[14]
    assert cursor.individually_deleted_ranges == []
    assert cursor.number_of_entries_in_backlog == 15
    assert [e.data for e in await cursor.read_entries(3)] == [data(15), data(16), data(17)]
    await cursor.seek(positions[28])  # forward
    assert [e.data for e in await cursor.read_entries(10)] == [data(28), data(29)]
    await cursor.seek(Position(positions[-1].ledger_id, 10_000))  # past the end: at the end
    assert cursor.number_of_entries_in_backlog == 0
    await fill(ledger, 1, start=30)
    assert [e.data for e in await cursor.read_entries(10)] == [data(30)]


async def test_read_or_wait_wakes_at_the_next_add_and_can_be_cancelled(ledger: ManagedLedger) -> None:
    cursor = await ledger.open_cursor("sub")
    waiting = asyncio.create_task(cursor.read_entries_or_wait(10))
    other = cursor.ledger.wait_for_new_entries()
    await asyncio.sleep(0.05)
    assert not waiting.done()
    other.cancel()  # one waiter giving up does not disturb another
    await fill(ledger, 2)
    woken = [e.data for e in await waiting]
    assert woken + [e.data for e in await cursor.read_entries(10)] == [data(0), data(1)]
    idle = asyncio.create_task(cursor.read_entries_or_wait(10))
    await asyncio.sleep(0.05)
    idle.cancel()
    with pytest.raises(asyncio.CancelledError):
        await idle
    stopped = asyncio.create_task(cursor.read_entries_or_wait(10))
    await asyncio.sleep(0.05)
    await ledger.close()
    with pytest.raises(ManagedLedgerClosedError):
        await stopped


async def test_non_durable_cursors_start_where_asked_and_persist_nothing(
    ledger: ManagedLedger, storage: Storage
) -> None:
    positions = await fill(ledger, 15)
    earliest = ledger.new_non_durable_cursor(InitialPosition.EARLIEST)
    latest = ledger.new_non_durable_cursor(InitialPosition.LATEST)
    inclusive = ledger.new_non_durable_cursor(positions[11])
    exclusive = ledger.new_non_durable_cursor(positions[11], inclusive=False)
    assert (await earliest.read_entries(1))[0].data == data(0)
    assert await latest.read_entries(10) == []
    assert [e.data for e in await inclusive.read_entries(10)] == [data(i) for i in range(11, 15)]
    assert [e.data for e in await exclusive.read_entries(10)] == [data(i) for i in range(12, 15)]
    await earliest.mark_delete(positions[-1])
    assert not earliest.durable
    assert ledger.cursors == {}
    assert await storage.store.exists(f"/managed-ledgers/{ledger.name}/cursors") is None
    # Readers do not hold back retention: every closed ledger is consumed.
    ledger.config = ledger.config.model_copy(update=TRIM)
    await ledger.trim()
    assert len(ledger.ledgers) == 1


async def test_deleting_a_cursor_forgets_it_and_releases_its_ledgers(ledger: ManagedLedger) -> None:
    await fill(ledger, 25)
    await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    assert len(ledger.ledgers) == 3
    ledger.config = ledger.config.model_copy(update=TRIM)
    await ledger.delete_cursor("sub")
    assert ledger.cursors == {}
    assert len(ledger.ledgers) == 1
    again = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    assert again.number_of_entries_in_backlog == 5


async def test_find_first_position_by_predicate_across_ledgers(ledger: ManagedLedger) -> None:
    await ledger.open_cursor("keep", InitialPosition.EARLIEST)
    positions = await fill(ledger, 47)
    for target in (0, 9, 10, 31, 46):
        found = await ledger.find_first_position(lambda e, t=target: int(e.data.split(b"-")[1]) >= t)
        assert found == positions[target]
    assert await ledger.find_first_position(lambda e: False) is None
