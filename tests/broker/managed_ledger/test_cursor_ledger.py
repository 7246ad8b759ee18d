"""A durable cursor's acknowledgements live in a cursor ledger of its own; the metadata store holds
only which ledger that is and a snapshot written when it changes and at close."""

from __future__ import annotations

import json
from typing import Any

import pytest

from magnetar.bookie.client import LedgerClient, NoSuchLedgerError
from magnetar.broker.managed_ledger import (
    InitialPosition,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    ManagedLedgerFencedError,
)
from magnetar.broker.managed_ledger.meta_store import cursor_path
from magnetar.common.metadata import MetadataError, NoNodeError
from tests.broker.managed_ledger.conftest import Storage

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=10, min_ledger_rollover_time_minutes=0)

_WRITES = ("put", "create", "delete")
_ALL = (*_WRITES, "get", "exists", "children")


def data(i: int) -> bytes:
    return f"message-{i}".encode()


async def node(storage: Storage, ledger: str, cursor: str = "sub") -> dict[str, Any]:
    raw, _ = await storage.store.get(cursor_path(ledger, cursor))
    doc: dict[str, Any] = json.loads(raw)
    return doc


def count_opens(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ledger the ledger client opens from now on, by its id."""
    opened: list[int] = []
    real_open = LedgerClient.open_ledger

    async def counted(client: LedgerClient, ledger_id: int) -> Any:
        opened.append(ledger_id)
        return await real_open(client, ledger_id)

    monkeypatch.setattr(LedgerClient, "open_ledger", counted)
    return opened


def count_writes(storage: Storage, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every write made to the store from now on, by its path."""
    writes: list[str] = []
    for method in _WRITES:
        real = getattr(storage.store, method)

        async def counted(path: str, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            writes.append(path)
            return await _real(path, *args, **kwargs)

        monkeypatch.setattr(storage.store, method, counted)
    return writes


def store_down(storage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call to the store fails as during an outage. The broker's managed ledger and its
    ledger client share this store, so this models the outage for both (a SIGSTOPped ZooKeeper
    would need a server of the test's own, the fixtures' is shared)."""
    for method in _ALL:

        async def refused(*args: Any, **kwargs: Any) -> Any:
            raise MetadataError("connection to the metadata store lost")

        monkeypatch.setattr(storage.store, method, refused)


async def test_acks_are_persisted_while_the_store_is_down(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/outage")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(8)]
    await cursor.delete([positions[0]])
    await cursor.flush()  # the first write after the open records the cursor ledger
    with monkeypatch.context() as outage:
        store_down(storage, outage)
        await cursor.mark_delete(positions[3])
        await cursor.delete([positions[5], positions[7]])
        await cursor.flush()
        # The broker dies during the outage (no close).
    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/outage")
    again = reopened.cursors["sub"]
    assert again.mark_delete_position == positions[3]
    assert again.individually_deleted_ranges == [(positions[5], positions[5]), (positions[7], positions[7])]
    assert [e.data for e in await again.read_entries(10)] == [data(4), data(6)]  # no redelivery
    await reopened.close()


async def test_store_writes_stay_flat_as_acks_grow_tenfold(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/flat")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    await cursor.mark_delete(await ledger.add_entry(data(0)))
    await cursor.flush()  # the cursor ledger is created and recorded
    written: list[int] = []
    for acks in (10, 100):
        positions = [await ledger.add_entry(data(i)) for i in range(acks)]
        writes = count_writes(storage, monkeypatch)
        for position in positions:
            await cursor.delete([position])
            await cursor.flush()
        monkeypatch.undo()
        written.append(len([w for w in writes if "/cursors/" in w]))
    assert written == [0, 0]
    assert cursor.number_of_entries_in_backlog == 0
    await factory.close()


async def test_rollover_keeps_the_position_and_deletes_the_old_ledger(storage: Storage) -> None:
    config = CONFIG.model_copy(update={"cursor_max_entries_per_ledger": 5})
    factory = ManagedLedgerFactory(storage.store, storage.client, config)
    ledger = await factory.open("t/ns/persistent/rollover")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(20)]
    await cursor.mark_delete(positions[0])
    await cursor.flush()
    first = (await node(storage, "t/ns/persistent/rollover"))["cursors_ledger"]
    for position in positions[1:8]:  # 8 entries in all: past 5, so one rollover
        await cursor.mark_delete(position)
        await cursor.flush()
    doc = await node(storage, "t/ns/persistent/rollover")
    assert doc["cursors_ledger"] not in (first, -1)
    with pytest.raises(NoSuchLedgerError):
        await storage.client.ledger_metadata(first)
    await cursor.mark_delete(positions[9])
    await cursor.flush()
    reopened = await (await storage.new_factory(config)).open("t/ns/persistent/rollover")  # no close
    assert reopened.cursors["sub"].mark_delete_position == positions[9]
    await reopened.close()


async def test_deleting_the_cursor_deletes_its_ledger(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/delete")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    await cursor.mark_delete(await ledger.add_entry(data(0)))
    await cursor.flush()
    cursor_ledger = (await node(storage, "t/ns/persistent/delete"))["cursors_ledger"]
    await storage.client.ledger_metadata(cursor_ledger)  # it exists
    await ledger.delete_cursor("sub")
    with pytest.raises(NoSuchLedgerError):
        await storage.client.ledger_metadata(cursor_ledger)
    with pytest.raises(NoNodeError):
        await node(storage, "t/ns/persistent/delete")
    await factory.close()


async def test_after_a_crash_the_last_entry_of_the_cursor_ledger_wins(storage_any: Storage) -> None:
    storage = storage_any
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/crash")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(8)]
    await cursor.mark_delete(positions[1])
    await cursor.flush()
    await cursor.mark_delete(positions[4], {"dedup": 7})
    await cursor.delete([positions[6]])
    await cursor.flush()
    doc = await node(storage, "t/ns/persistent/crash")
    assert doc["mark_delete"] == [positions[1].ledger_id, positions[1].entry_id]  # a stale snapshot
    # The broker dies (no close): the next owner fences the cursor ledger and reads its end.
    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/crash")
    again = reopened.cursors["sub"]
    assert again.mark_delete_position == positions[4]
    assert again.individually_deleted_ranges == [(positions[6], positions[6])]
    assert again.properties == {"dedup": 7}
    await cursor.mark_delete(positions[7])  # the deposed owner cannot write past the takeover
    with pytest.raises(ManagedLedgerFencedError, match="another broker"):
        await cursor.flush()
    await reopened.close()


async def test_close_writes_the_snapshot_and_an_empty_ledger_means_the_snapshot(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/close")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(5)]
    await cursor.mark_delete(positions[0])
    await cursor.flush()
    await cursor.mark_delete(positions[2])
    await factory.close()
    doc = await node(storage, "t/ns/persistent/close")
    assert doc["mark_delete"] == [positions[2].ledger_id, positions[2].entry_id]
    # A ledger named by the node with no entries (created, never written): the snapshot counts.
    empty = await storage.client.create_ledger(2, 2, 2)
    path = cursor_path("t/ns/persistent/close", "sub")
    crashed = {k: v for k, v in doc.items() if k != "closed"}  # as a crash leaves it: the ledger counts
    await storage.store.put(path, json.dumps({**crashed, "cursors_ledger": empty.ledger_id}).encode())
    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/close")
    assert reopened.cursors["sub"].mark_delete_position == positions[2]
    await reopened.close()


async def test_a_cursor_closed_by_its_owner_loads_without_reading_its_ledger(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unload closes every cursor of a bundle and its next owner loads them all: the close's
    snapshot is the owner's last state, so reading the cursor ledger's last entry (a round trip
    to the store and one to a bookie per cursor) learns nothing."""
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/closed")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(6)]
    await cursor.mark_delete(positions[1])
    await cursor.flush()  # in the cursor ledger
    await cursor.delete([positions[3]])
    await cursor.flush()
    await cursor.mark_delete(positions[4])  # only in the close's snapshot and last entry
    await factory.close()
    cursor_ledger = (await node(storage, "t/ns/persistent/closed"))["cursors_ledger"]
    assert cursor_ledger >= 0
    opened = count_opens(monkeypatch)
    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/closed")
    again = reopened.cursors["sub"]
    assert cursor_ledger not in opened
    assert again.mark_delete_position == positions[4]
    assert [e.data for e in await again.read_entries(10)] == [data(5)]
    # The old ledger goes once the new owner has its own, as after a recovery.
    await again.mark_delete(positions[5])
    await again.flush()
    assert (await node(storage, "t/ns/persistent/closed"))["cursors_ledger"] not in (cursor_ledger, -1)
    with pytest.raises(NoSuchLedgerError):
        await storage.client.ledger_metadata(cursor_ledger)
    await reopened.close()


async def test_a_cursor_closed_unchanged_since_its_last_flush_loads_without_reading_its_ledger(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic acknowledged once after its load and idle since (its node names the ledger of that
    flush and holds the same state) is the common case of a bundle's idle topics."""
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/idle")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(3)]
    await cursor.mark_delete(positions[1])
    await cursor.flush()  # the first write after the open: a new ledger, named by the node
    await factory.close()
    doc = await node(storage, "t/ns/persistent/idle")
    assert doc["closed"] is True
    opened = count_opens(monkeypatch)
    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/idle")
    assert doc["cursors_ledger"] not in opened
    assert reopened.cursors["sub"].mark_delete_position == positions[1]
    await reopened.close()


async def test_a_node_written_before_cursor_ledgers_still_loads(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/old-node")
    await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(6)]
    await factory.close()
    p = positions
    old_format = {
        "mark_delete": [p[1].ledger_id, p[1].entry_id],
        "ranges": [[p[3].ledger_id, p[3].entry_id, p[4].ledger_id, p[4].entry_id]],
        "properties": {"dedup": 3},
        "writer": "0123456789abcdef",
    }
    await storage.store.put(cursor_path("t/ns/persistent/old-node", "sub"), json.dumps(old_format).encode())
    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/old-node")
    again = reopened.cursors["sub"]
    assert again.mark_delete_position == p[1]
    assert again.individually_deleted_ranges == [(p[3], p[4])]
    assert again.properties == {"dedup": 3}
    assert [e.data for e in await again.read_entries(10)] == [data(2), data(5)]
    await again.mark_delete(p[5])
    await reopened.close()
    assert (await node(storage, "t/ns/persistent/old-node"))["mark_delete"] == [p[5].ledger_id, p[5].entry_id]


async def test_deleting_the_managed_ledger_deletes_its_cursor_ledgers(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/drop")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    await cursor.mark_delete(await ledger.add_entry(data(0)))
    await cursor.flush()
    cursor_ledger = (await node(storage, "t/ns/persistent/drop"))["cursors_ledger"]
    await factory.delete("t/ns/persistent/drop")
    with pytest.raises(NoSuchLedgerError):
        await storage.client.ledger_metadata(cursor_ledger)
    assert await factory.list("t/ns/persistent") == []
