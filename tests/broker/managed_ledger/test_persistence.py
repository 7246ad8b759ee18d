"""Cursor state across a broker restart, and a deposed owner unable to overwrite it."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.managed_ledger import (
    InitialPosition,
    ManagedLedgerClosedError,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    ManagedLedgerFencedError,
)
from tests.broker.managed_ledger.conftest import Storage

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=10, min_ledger_rollover_time_minutes=0)


def data(i: int) -> bytes:
    return f"message-{i}".encode()


async def test_cursor_state_is_restored_exactly_after_a_restart(storage_any: Storage) -> None:
    storage = storage_any
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/acks")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(40)]  # four ledgers
    await cursor.read_entries(40)
    await cursor.mark_delete(positions[12], {"dedup-producer": 41})
    acked = {5, 14, 15, 16, 19, 20, 21, 33, 39}
    await cursor.delete([positions[i] for i in acked])
    mark, ranges = cursor.mark_delete_position, cursor.individually_deleted_ranges
    assert mark == positions[12]
    assert len(ranges) == 4
    await factory.close()

    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/acks")
    again = reopened.cursors["sub"]
    assert again.mark_delete_position == mark
    assert again.individually_deleted_ranges == ranges
    assert again.properties == {"dedup-producer": 41}
    unacked = [data(i) for i in range(13, 40) if i not in acked]
    assert again.number_of_entries_in_backlog == len(unacked)
    assert [e.data for e in await again.read_entries(100)] == unacked
    await reopened.close()


async def test_acks_are_persisted_shortly_without_a_close(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/flush")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(6)]
    await cursor.delete([positions[0], positions[1], positions[4]])
    await asyncio.sleep(ledger.config.cursor_flush_interval_ms / 1000 * 3)
    # The broker "dies" here (no close). Another one takes the managed ledger over.
    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/flush")
    assert [e.data for e in await reopened.cursors["sub"].read_entries(10)] == [
        data(2),
        data(3),
        data(5),
    ]
    await reopened.close()


async def test_a_deposed_owner_cannot_overwrite_the_new_owners_cursors(storage: Storage) -> None:
    old = await ManagedLedgerFactory(storage.store, storage.client, CONFIG).open("t/ns/persistent/own")
    old_cursor = await old.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await old.add_entry(data(i)) for i in range(5)]
    await old_cursor.mark_delete(positions[1])
    await old_cursor.flush()

    new = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/own")
    assert new.cursors["sub"].mark_delete_position == positions[1]
    await old_cursor.mark_delete(positions[4])  # the old owner still thinks it owns the cursor
    with pytest.raises(ManagedLedgerFencedError):
        await old_cursor.flush()
    await old.close()  # neither this nor anything else of the old owner changes the state
    await new.close()
    third = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/own")
    assert third.cursors["sub"].mark_delete_position == positions[1]
    assert [e.data for e in await third.cursors["sub"].read_entries(10)] == [data(2), data(3), data(4)]
    await third.close()


async def test_seek_is_persisted_at_once(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/seek")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(8)]
    await cursor.mark_delete(positions[-1])
    await cursor.flush()
    await cursor.seek(positions[3])
    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/seek")  # no close
    assert [e.data for e in await reopened.cursors["sub"].read_entries(10)] == [data(i) for i in range(3, 8)]
    await reopened.close()


async def test_deleted_cursor_stays_deleted_after_restart(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/gone")
    await ledger.open_cursor("kept")
    await ledger.open_cursor("gone")
    await ledger.delete_cursor("gone")
    await factory.close()
    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/gone")
    assert set(reopened.cursors) == {"kept"}
    await reopened.close()


async def test_properties_survive_a_restart_rolls_and_a_deposed_owner(storage: Storage) -> None:
    old = await ManagedLedgerFactory(storage.store, storage.client, CONFIG).open("t/ns/persistent/props")
    await old.set_property("pulsar.topic.epoch", "3")
    for i in range(25):  # rolls twice: each roll rewrites the ledger list, properties kept
        await old.add_entry(data(i))
    new = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/props")
    assert new.properties == {"pulsar.topic.epoch": "3"}
    await new.set_property("pulsar.topic.epoch", "4")
    with pytest.raises(ManagedLedgerFencedError):  # the old owner can no longer change them
        await old.set_property("pulsar.topic.epoch", "9")
    await new.close()
    third = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/props")
    assert third.properties == {"pulsar.topic.epoch": "4"}
    await third.close()


async def test_an_ack_after_the_close_is_refused_not_answered_and_forgotten(storage: Storage) -> None:
    # An unload closes the topic while acks are on their way (a read-only owner forwards them
    # over RPC): one applied after the cursor's last write must fail, so its sender tries the
    # topic's next owner, instead of being answered as done and lost with the old instance.
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/late-acks")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(6)]
    await cursor.delete(positions[:2])
    await factory.close()
    with pytest.raises(ManagedLedgerClosedError, match="closed"):
        await cursor.delete(positions[2:4])
    with pytest.raises(ManagedLedgerClosedError, match="closed"):
        await cursor.mark_delete(positions[4])

    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/late-acks")
    again = reopened.cursors["sub"]
    assert again.mark_delete_position == positions[1]
    await again.delete(positions[2:4])  # the sender's retry, at the next owner
    assert [e.data for e in await again.read_entries(10)] == [data(4), data(5)]
    await reopened.close()
