"""Managed ledgers over real (in-process) bookies: appends, reads, rolling, fencing, retention."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from magnetar.bookie.config import BookieConfig
from magnetar.bookie.server import start_bookie
from magnetar.broker.managed_ledger import (
    InitialPosition,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFactory,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
    Position,
)
from tests.broker.managed_ledger.conftest import Storage

ROLL_EVERY_10 = ManagedLedgerConfig(max_entries_per_ledger=10, min_ledger_rollover_time_minutes=0)


async def eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def data(i: int) -> bytes:
    return f"message-{i}".encode()


async def test_concurrent_adds_complete_in_order_and_read_back_byte_for_byte(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client)
    ledger = await factory.open("t/ns/persistent/a")
    payloads = [bytes(range(256)) * (i % 3) + data(i) + b"\x00\xff" for i in range(200)]
    positions = await asyncio.gather(*(ledger.add_entry(p) for p in payloads))
    assert positions == sorted(positions)
    assert len(set(positions)) == 200
    assert ledger.last_confirmed_entry == positions[-1]
    assert ledger.number_of_entries == 200
    assert ledger.total_size == sum(len(p) for p in payloads)
    fresh = await (await storage.new_factory()).open("t/ns/persistent/a")  # reads from the bookies
    entries = await fresh.read_entries(fresh.first_position(), 500)
    assert [e.data for e in entries] == payloads
    assert [e.position for e in entries] == positions
    await fresh.close()


async def test_ledgers_roll_by_entry_count_and_reads_cross_them(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, ROLL_EVERY_10)
    ledger = await factory.open("t/ns/persistent/roll")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)  # keeps every ledger
    positions = [await ledger.add_entry(data(i)) for i in range(35)]
    assert [i.entries for i in ledger.ledgers] == [10, 10, 10, -1]
    assert len({p.ledger_id for p in positions}) == 4
    # One read spanning all ledgers; a read starting past a ledger's end moves to the next one.
    assert [e.data for e in await ledger.read_entries(positions[0], 100)] == [data(i) for i in range(35)]
    past_end = Position(positions[9].ledger_id, 10)
    assert (await ledger.read_entries(past_end, 1))[0].position == positions[10]
    got = []
    while batch := await cursor.read_entries(7):
        got += batch
    assert [e.data for e in got] == [data(i) for i in range(35)]
    assert cursor.number_of_entries_in_backlog == 35
    await factory.close()


async def test_adds_queued_behind_a_roll_stay_ahead_of_later_adds(storage: Storage) -> None:
    """Adds that wait for the write lock (a roll, a termination, a maintenance roll holds it) are
    stored before any add issued after them, also in the loop turns after the lock is let go,
    while the first of them is woken but has not run yet."""
    factory = ManagedLedgerFactory(storage.store, storage.client)
    ledger = await factory.open("t/ns/persistent/queued-order")
    answers: list[tuple[int, Position | None, BaseException | None]] = []

    def add(i: int) -> None:
        ledger.add_entry_then(data(i), lambda position, error: answers.append((i, position, error)))

    lock = ledger._write_lock  # held here as a roll holds it
    await lock.acquire()
    for i in range(5):
        add(i)
    await asyncio.sleep(0)  # they wait for the lock
    lock.release()  # the first is woken, and runs in a later loop turn
    for i in range(5, 10):
        add(i)
        await asyncio.sleep(0)
    await eventually(lambda: len(answers) == 10)
    assert [error for _, _, error in answers] == [None] * 10
    assert [i for i, _, _ in answers] == list(range(10))
    entries = await ledger.read_entries(ledger.first_position(), 100)
    assert [e.data for e in entries] == [data(i) for i in range(10)]
    await factory.close()


async def test_reads_honour_max_bytes_but_return_at_least_one_entry(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client)
    ledger = await factory.open("t/ns/persistent/bytes")
    first = await ledger.add_entry(b"x" * 100)
    for _ in range(9):
        await ledger.add_entry(b"x" * 100)
    assert len(await ledger.read_entries(first, 10, max_bytes=350)) == 3
    assert len(await ledger.read_entries(first, 10, max_bytes=10)) == 1
    cursor = ledger.new_non_durable_cursor(InitialPosition.EARLIEST)
    assert len(await cursor.read_entries(10, max_bytes=250)) == 2
    assert len(await cursor.read_entries(10)) == 8
    with pytest.raises(ValueError, match="max_entries"):
        await ledger.read_entries(first, 0)
    await factory.close()


async def test_reopening_fences_the_previous_owner(storage: Storage) -> None:
    first = await ManagedLedgerFactory(storage.store, storage.client).open("t/ns/persistent/fence")
    for i in range(5):
        await first.add_entry(data(i))
    second = await (await storage.new_factory()).open("t/ns/persistent/fence")
    with pytest.raises(ManagedLedgerFencedError, match="opened by another broker"):
        await first.add_entry(b"from the deposed owner")
    with pytest.raises(ManagedLedgerFencedError):
        await first.add_entry(b"and again")
    await second.add_entry(data(5))
    cursor = await second.open_cursor("sub", InitialPosition.EARLIEST)
    assert [e.data for e in await cursor.read_entries(10)] == [data(i) for i in range(6)]
    await first.close()  # the deposed owner's close changes nothing
    third = await (await storage.new_factory()).open("t/ns/persistent/fence")
    reader = third.new_non_durable_cursor(InitialPosition.EARLIEST)
    assert [e.data for e in await reader.read_entries(10)] == [data(i) for i in range(6)]
    await third.close()


async def test_an_unclosed_ledger_is_recovered_with_every_confirmed_entry(storage: Storage) -> None:
    crashed = await ManagedLedgerFactory(storage.store, storage.client).open("t/ns/persistent/crash")
    confirmed = await asyncio.gather(*(crashed.add_entry(data(i)) for i in range(50)))
    # No close: the broker "dies". A new broker recovers the open ledger.
    ledger = await (await storage.new_factory()).open("t/ns/persistent/crash")
    assert ledger.last_confirmed_entry == confirmed[-1]
    assert ledger.ledgers[0].entries == 50
    entries = await ledger.read_entries(ledger.first_position(), 100)
    assert [e.data for e in entries] == [data(i) for i in range(50)]
    await ledger.close()


async def test_consumed_ledgers_are_deleted_and_needed_ones_kept(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, ROLL_EVERY_10)
    ledger = await factory.open("t/ns/persistent/retention")
    fast = await ledger.open_cursor("fast", InitialPosition.EARLIEST)
    slow = await ledger.open_cursor("slow", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(35)]
    first_ledger, second_ledger = positions[0].ledger_id, positions[10].ledger_id
    await fast.mark_delete(positions[-1])
    await slow.mark_delete(positions[12])  # has passed the first ledger only
    await ledger.trim()
    await ledger.settle()
    ids = [i.ledger_id for i in ledger.ledgers]
    assert first_ledger not in ids
    assert second_ledger in ids
    assert first_ledger not in await storage.client.ledger_ids()
    assert second_ledger in await storage.client.ledger_ids()
    assert [e.data for e in await slow.read_entries(100)] == [data(i) for i in range(13, 35)]
    assert ledger.number_of_entries == 25
    # A reader asking for the earliest now starts at the oldest entry kept.
    reader = ledger.new_non_durable_cursor(InitialPosition.EARLIEST)
    assert (await reader.read_entries(1))[0].data == data(10)
    await factory.close()


async def test_consumed_ledgers_are_kept_while_retention_allows(storage: Storage) -> None:
    forever = ROLL_EVERY_10.model_copy(update={"retention_time_minutes": -1, "retention_size_mb": -1})
    factory = ManagedLedgerFactory(storage.store, storage.client, forever)
    ledger = await factory.open("t/ns/persistent/kept")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    positions = [await ledger.add_entry(data(i)) for i in range(25)]
    await cursor.mark_delete(positions[-1])
    assert await ledger.trim() == []
    assert len(ledger.ledgers) == 3
    # Size-bound retention: keep consumed data only while it fits in the limit (here: none).
    ledger.config = ROLL_EVERY_10.model_copy(update={"retention_time_minutes": -1, "retention_size_mb": 0})
    assert len(await ledger.trim()) == 2
    await factory.close()


async def test_a_topic_without_subscriptions_keeps_only_its_current_ledger(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, ROLL_EVERY_10)
    ledger = await factory.open("t/ns/persistent/nosubs")
    for i in range(25):
        await ledger.add_entry(data(i))
    await ledger.trim()
    assert [i.entries for i in ledger.ledgers] == [-1]  # as Pulsar: nobody needs the old ones
    assert ledger.number_of_entries == 5
    await factory.close()


async def test_terminate_refuses_further_adds_even_after_reopen(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client)
    ledger = await factory.open("t/ns/persistent/term")
    last = await ledger.add_entry(b"last words")
    assert await ledger.terminate() == last
    with pytest.raises(ManagedLedgerTerminatedError):
        await ledger.add_entry(b"more")
    await factory.close()
    reopened = await (await storage.new_factory()).open("t/ns/persistent/term")
    assert reopened.is_terminated
    with pytest.raises(ManagedLedgerTerminatedError):
        await reopened.add_entry(b"more")
    assert (await reopened.read_entries(reopened.first_position(), 5))[0].data == b"last words"
    await reopened.close()


async def test_factory_lists_and_deletes_managed_ledgers(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client)
    for name in ("t/ns/persistent/a", "t/ns/persistent/b", "t/other/persistent/c"):
        ledger = await factory.open(name)
        await ledger.open_cursor("sub")
        await ledger.add_entry(b"x")
    assert await factory.list() == ["t/ns/persistent/a", "t/ns/persistent/b", "t/other/persistent/c"]
    assert await factory.list("t/ns/persistent") == ["t/ns/persistent/a", "t/ns/persistent/b"]
    assert await factory.list("nope") == []
    ledger_ids = [i.ledger_id for i in (await factory.open("t/ns/persistent/a")).ledgers]
    await factory.delete("t/ns/persistent/a")
    assert await factory.list("t/ns") == ["t/ns/persistent/b"]
    assert not set(ledger_ids) & set(await storage.client.ledger_ids())
    again = await factory.open("t/ns/persistent/a")  # a new, empty one
    assert again.number_of_entries == 0
    assert again.cursors == {}
    await factory.close()


async def test_bad_input_gets_specific_errors(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client)
    for bad in ("", "/t/ns/x", "t//x", "t/../x"):
        with pytest.raises(ManagedLedgerError, match="invalid managed ledger name"):
            await factory.open(bad)
    ledger = await factory.open("t/ns/persistent/bad")
    with pytest.raises(TypeError, match="bytes"):
        await ledger.add_entry("text")  # type: ignore[arg-type]
    with pytest.raises(ManagedLedgerError, match="invalid cursor name"):
        await ledger.open_cursor("")
    with pytest.raises(ValueError, match="write_quorum"):
        ManagedLedgerConfig(ensemble_size=1, write_quorum=2, ack_quorum=1)
    await factory.close()
    with pytest.raises(ManagedLedgerError, match="closed"):
        await ledger.add_entry(b"after close")


async def test_an_idle_ledger_is_rolled_and_trimmed_by_the_periodic_check(storage: Storage) -> None:
    config = ManagedLedgerConfig(
        max_ledger_rollover_time_minutes=0.002, retention_check_interval_seconds=0.05
    )
    factory = ManagedLedgerFactory(storage.store, storage.client, config)
    ledger = await factory.open("t/ns/persistent/idle")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    first = await ledger.add_entry(b"only one")
    await eventually(lambda: len(ledger.ledgers) > 1)  # rolled without any further add
    assert ledger.ledgers[0].entries == 1
    await cursor.mark_delete(first)
    await eventually(lambda: first.ledger_id not in [i.ledger_id for i in ledger.ledgers])  # trimmed
    second = await ledger.add_entry(b"next")
    assert second.ledger_id > first.ledger_id
    await factory.close()


async def test_after_a_write_failure_the_next_add_continues_on_a_new_ledger(
    storage: Storage, tmp_path: Path
) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client)
    ledger = await factory.open("t/ns/persistent/fail")
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    for i in range(5):
        await ledger.add_entry(data(i))
    await storage.bookies[1].stop()  # ensemble 2 of 2 bookies: no replacement, the write fails
    with pytest.raises(ManagedLedgerError, match="not enough writable bookies"):
        await ledger.add_entry(b"unconfirmed")
    root = tmp_path / "bookie-new"
    config = BookieConfig(
        bookie_port=0,
        journal_directory=str(root / "journal"),
        ledger_directories=[str(root / "ledgers")],
        metadata_service_uri=storage.url,
        prometheus_stats_http_port=0,
        auto_recovery_daemon_enabled=False,
    )
    storage.bookies.append(await start_bookie(config))
    after = await ledger.add_entry(b"after")
    assert after.ledger_id != ledger.ledgers[0].ledger_id
    got = [e.data for e in await cursor.read_entries(100)]
    # Every confirmed entry is there; the unconfirmed one may be too (it reached a bookie).
    assert got[:5] == [data(i) for i in range(5)]
    assert got[-1] == b"after"
    assert set(got[5:-1]) <= {b"unconfirmed"}
    await factory.close()
