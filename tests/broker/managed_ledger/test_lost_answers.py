"""A metadata-store blip is not a change of owner: a write whose answer was lost, but
which the store applied, must not make the next write look like another broker's takeover."""

from __future__ import annotations

import contextlib

import pytest

from magnetar.broker.managed_ledger import (
    InitialPosition,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFactory,
    ManagedLedgerFencedError,
)
from magnetar.common.metadata import MetadataError, Stat
from tests.broker.managed_ledger.conftest import Storage

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=5, min_ledger_rollover_time_minutes=0)


def lose_answers(storage: Storage, monkeypatch: pytest.MonkeyPatch, count: int, under: str) -> list[str]:
    """The next ``count`` writes below ``under`` are applied, then fail as a dropped connection
    would (the writer cannot tell whether they were); returns the paths they hit."""
    put = storage.store.put
    hit: list[str] = []

    async def applied_then_lost(path: str, value: bytes, *, expected_version: int | None = None) -> Stat:
        stat = await put(path, value, expected_version=expected_version)
        if path.startswith(under) and len(hit) < count:
            hit.append(path)
            raise MetadataError("connection lost (the write was applied)")
        return stat

    monkeypatch.setattr(storage.store, "put", applied_then_lost)
    return hit


async def test_a_cursor_write_whose_answer_was_lost_does_not_fence_the_topic(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/blip")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(b"m%d" % i) for i in range(12)]
    hit = lose_answers(storage, monkeypatch, 2, "/managed-ledgers/t/ns/persistent/blip/cursors")
    # Each flush below writes the node: until one is answered, none has recorded a cursor ledger.
    await cursor.mark_delete(positions[3])
    with pytest.raises(ManagedLedgerError, match="connection lost"):
        await cursor.flush()
    await cursor.mark_delete(positions[5])
    with pytest.raises(ManagedLedgerError, match="connection lost"):
        await cursor.flush()  # a second lost answer in a row
    assert len(hit) == 2
    await cursor.mark_delete(positions[7])
    await cursor.flush()  # the store is back: the lost writes were ours
    assert not ledger.is_fenced
    assert await ledger.add_entry(b"after the blip")  # the topic still takes messages
    await factory.close()
    reopened = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/blip")
    assert reopened.cursors["sub"].mark_delete_position == positions[7]


async def test_a_ledger_list_write_whose_answer_was_lost_does_not_fence_the_topic(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/roll-blip")
    await ledger.add_entry(b"first")
    hit = lose_answers(storage, monkeypatch, 1, "/managed-ledgers/t/ns/persistent/roll-blip")
    written = []
    for i in range(12):  # rolls a ledger or two: each roll writes the ledger list
        with contextlib.suppress(ManagedLedgerError):  # the roll whose answer was lost: sent again
            written.append(await ledger.add_entry(b"m%d" % i))
    assert hit, "no ledger-list write was made"
    assert not ledger.is_fenced
    assert len(written) >= 10
    await factory.close()


async def test_another_brokers_takeover_still_fences_after_a_lost_answer(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, CONFIG)
    ledger = await factory.open("t/ns/persistent/taken")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(b"m%d" % i) for i in range(6)]
    lose_answers(storage, monkeypatch, 1, "/managed-ledgers/t/ns/persistent/taken/cursors")
    await cursor.mark_delete(positions[1])
    with pytest.raises(ManagedLedgerError):
        await cursor.flush()
    monkeypatch.undo()
    # Another broker takes the topic over: it rewrites the cursor as its own.
    other = await (await storage.new_factory(CONFIG)).open("t/ns/persistent/taken")
    assert other.cursors["sub"].mark_delete_position == positions[1]
    await cursor.mark_delete(positions[2])
    with pytest.raises(ManagedLedgerFencedError, match="rewritten by another broker"):
        await cursor.flush()
