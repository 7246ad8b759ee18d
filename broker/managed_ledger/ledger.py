"""A managed ledger: a topic's append-only log over a list of BookKeeper ledgers.

Metadata (the list of ledgers with their entry counts, sizes and close times) is a JSON document
at ``/managed-ledgers/<name>``, always written with compare-and-set on its version: a broker that
lost the managed ledger to another one finds out at its next metadata write, and its writes to
the (fenced) ledger fail before that.

This class writes the log: adds, ledger rolls, retention, termination and close. It is helped,
as Pulsar's ManagedLedgerImpl is, by ``LedgerRecord`` (the node), ``LedgerReaders`` (reads of
the ledgers it does not write), ``DurableCursors``, ``ledger_recovery`` and ``ledger_deletion``.
It is the owner's ``TopicLedger``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable

from magnetar.bookie.client import BKError, LedgerClient, LedgerFencedError, LedgerHandle
from magnetar.broker.managed_ledger import meta_store, reads, rollover
from magnetar.broker.managed_ledger.config import ManagedLedgerConfig
from magnetar.broker.managed_ledger.cursor import ManagedCursor
from magnetar.broker.managed_ledger.durable_cursors import DurableCursors
from magnetar.broker.managed_ledger.entry_cache import EntryCache
from magnetar.broker.managed_ledger.errors import (
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
)
from magnetar.broker.managed_ledger.fencing import Fencing
from magnetar.broker.managed_ledger.ledger_deletion import delete_ledger
from magnetar.broker.managed_ledger.ledger_readers import LedgerReaders
from magnetar.broker.managed_ledger.ledger_record import LedgerRecord
from magnetar.broker.managed_ledger.ledger_recovery import recover
from magnetar.broker.managed_ledger.meta_store import LedgerInfo, validate_name
from magnetar.broker.managed_ledger.new_entries import NewEntries
from magnetar.broker.managed_ledger.position import Entry, InitialPosition, Position
from magnetar.broker.managed_ledger.retention import consumed_beyond_retention
from magnetar.broker.managed_ledger.span import Span
from magnetar.broker.managed_ledger.topic_ledger import AddCallback
from magnetar.common.background import BackgroundTasks
from magnetar.common.futures import settle
from magnetar.common.latency import LatencyHistogram
from magnetar.common.metadata import MetadataStore

log = logging.getLogger(__name__)

MB = 1024 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


class ManagedLedger:
    def __init__(
        self,
        name: str,
        store: MetadataStore,
        client: LedgerClient,
        config: ManagedLedgerConfig,
        write_latency: LatencyHistogram | None = None,
    ) -> None:
        self.name = validate_name(name)
        #: each add's time to Qa bookies (Pulsar's storage write latency), shared by a factory's ledgers
        self._write_latency = write_latency if write_latency is not None else LatencyHistogram()
        self.store = store
        self._client = client
        self.config = config
        #: the ledger list, termination and properties, as recorded in the store
        self._fencing = Fencing(self.name)
        self._record = LedgerRecord(store, self.name, self._fencing.deposed)
        self._writer: LedgerHandle | None = None
        self._writer_failed = False
        self._writer_created = 0.0
        self._write_lock = asyncio.Lock()  # orders adds and ledger rolls
        self._last_add: asyncio.Future[int] | None = None
        #: adds waiting their turn behind a roll (or the adds before them): none goes direct
        self._queued_adds = 0
        self._last_confirmed: Position | None = None
        self._readers = LedgerReaders(client, self.name)
        self._cache = EntryCache(config.cache_size_mb * MB)
        self._new_entries = NewEntries()
        self._cursors = DurableCursors(self, store, client)
        self._closed = False
        self._maintaining = False
        self._background = BackgroundTasks()
        #: a ledger created ahead of the open (by the factory's ``prepare``: a transfer's
        #: destination makes it while the source still writes), taken by the open instead of
        #: creating one, which keeps its round trips out of the handover
        self.prepared_writer: LedgerHandle | None = None
        self.entries_added = 0
        self.bytes_added = 0

    # -- opening --------------------------------------------------------------------------------
    async def open(self) -> None:
        """Load the metadata, fence and close what a previous owner left open, start a new ledger."""
        record = self._record
        await record.load()
        for info in record.ledgers:
            if info.entries < 0:
                await self._recover(info)
        for info in [i for i in record.ledgers if i.entries == 0]:
            record.ledgers.remove(info)
            self._delete_ledger_later(info.ledger_id)
        last = next((i for i in reversed(record.ledgers) if i.entries > 0), None)
        if last is not None:
            self._last_confirmed = Position(last.ledger_id, last.entries - 1)
        if record.terminated_at is None:
            await self._start_ledger()
        else:
            await record.save_locked()
        await self._cursors.load()

    def fenced(self, why: str) -> ManagedLedgerFencedError:
        """Mark this instance deposed (another broker owns the managed ledger now)."""
        return self._fencing.deposed(why)

    async def _recover(self, info: LedgerInfo) -> None:
        """Fence a ledger left open (by a previous owner or a failed writer) and learn its end."""
        handle = await recover(self._client, self.name, info)
        if handle is not None:
            self._readers.keep(info.ledger_id, handle)

    async def _start_ledger(self) -> None:
        writer = await self._take_prepared_writer()
        try:
            if writer is None:
                writer = await self._client.create_ledger(
                    self.config.ensemble_size,
                    self.config.write_quorum,
                    self.config.ack_quorum,
                    custom={"managed-ledger": self.name},
                )
        except BKError as exc:
            raise ManagedLedgerError(f"cannot create a ledger for {self.name}: {exc}") from exc
        async with self._record.lock:
            self._record.ledgers.append(LedgerInfo(writer.ledger_id, -1, 0, 0))
            try:
                await self._record.save()
            except ManagedLedgerFencedError:
                self._record.ledgers.pop()
                self._delete_ledger_later(writer.ledger_id)
                raise
            except ManagedLedgerError:
                self._record.ledgers.pop()
                self.prepared_writer = writer  # the next add records it again
                raise
        self._writer, self._writer_failed, self._writer_created = writer, False, time.monotonic()
        log.info("%s: writing to ledger %d", self.name, writer.ledger_id)

    async def _take_prepared_writer(self) -> LedgerHandle | None:
        writer, self.prepared_writer = self.prepared_writer, None
        if writer is not None and any(i.ledger_id >= writer.ledger_id for i in self._record.ledgers):
            # Positions order by ledger id: a ledger created before the last one cannot follow it
            # (the previous owner rolled after it was prepared).
            with contextlib.suppress(BKError):
                await writer.close()
            self._delete_ledger_later(writer.ledger_id)
            return None
        return writer

    # -- writing --------------------------------------------------------------------------------
    async def add_entry(self, data: bytes) -> Position:
        """Append; returns once Qa bookies have the entry. Concurrent calls complete in order."""
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self.add_entry_then(data, functools.partial(settle, future))
        return await future

    def add_entry_then(self, data: bytes, done: AddCallback) -> None:
        """Append; ``done(position, None)`` once Qa bookies have the entry, or ``done(None,
        error)``, in order with every add before it and never before this returns. With no roll
        and nothing queued before it, the entry goes to the writer in this call: no task, lock
        or awaited future per entry on a publish's path."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"add_entry takes bytes, not {type(data).__name__}")
        payload = data if type(data) is bytes else bytes(data)
        if self._queued_adds or self._write_lock.locked() or self._writer_failed or self._needs_roll():
            self._queued_adds += 1
            self._background.spawn(self._add_in_turn(payload, done))
            return
        try:
            self._check_writable()
        except ManagedLedgerError as exc:
            asyncio.get_running_loop().call_soon(done, None, exc)
            return
        self._submit(payload, done)

    async def _add_in_turn(self, payload: bytes, done: AddCallback) -> None:
        """An add that waits for a roll, or for the adds queued before it (the lock is FIFO, and
        no add takes the direct path while one is queued, so order is kept)."""
        queued = True
        try:
            async with self._write_lock:
                self._queued_adds -= 1
                queued = False
                self._check_writable()
                if self._writer_failed or self._needs_roll():
                    await self._roll()
                self._submit(payload, done)
        except asyncio.CancelledError:
            done(None, ManagedLedgerClosedError(f"managed ledger {self.name} is closed"))
            raise
        except Exception as exc:  # whatever stopped it is the add's answer
            done(None, exc)
        finally:
            if queued:
                self._queued_adds -= 1

    def _submit(self, payload: bytes, done: AddCallback) -> None:
        writer = self._writer
        assert writer is not None
        future = writer.add_entry_async(payload)
        self._last_add = future
        future.add_done_callback(
            functools.partial(self._confirmed, writer.ledger_id, payload, time.perf_counter(), done)
        )

    def _confirmed(
        self, ledger_id: int, payload: bytes, started: float, done: AddCallback, future: asyncio.Future[int]
    ) -> None:
        """The writer's answer (callbacks run in its completion order, which is the adds')."""
        error = None if future.cancelled() else future.exception()
        if future.cancelled() or error is not None:
            done(None, self._add_error(ledger_id, error))
            return
        self._write_latency.since(started)
        position = Position(ledger_id, future.result())
        self._added(position, payload)
        done(position, None)

    def _add_error(self, ledger_id: int, error: BaseException | None) -> BaseException:
        if isinstance(error, LedgerFencedError):
            fenced = self.fenced(f"ledger {ledger_id} was fenced")
            fenced.__cause__ = error
            return fenced
        if isinstance(error, BKError):
            # The next add closes this ledger (recovering what it holds) and starts a new one.
            self._writer_failed = True
            failed = ManagedLedgerError(f"cannot write to {self.name}: {error}")
            failed.__cause__ = error
            return failed
        return error if error is not None else ManagedLedgerError(f"an add to {self.name} was cancelled")

    def _check_writable(self) -> None:
        if self._fencing.fenced:
            raise ManagedLedgerFencedError(
                f"managed ledger {self.name} was opened by another broker; this instance can no longer write"
            )
        if self._closed:
            raise ManagedLedgerClosedError(f"managed ledger {self.name} is closed")
        if self._record.terminated_at is not None:
            raise ManagedLedgerTerminatedError(
                f"managed ledger {self.name} was terminated at {self._record.terminated_at}"
            )

    def _added(self, position: Position, data: bytes) -> None:
        if self._last_confirmed is None or position > self._last_confirmed:
            self._last_confirmed = position
        self.entries_added += 1
        self.bytes_added += len(data)
        ledgers = self._record.ledgers
        # The ledger being written is the last one: looked up only if a roll came in between.
        info = (
            ledgers[-1]
            if ledgers and ledgers[-1].ledger_id == position.ledger_id
            else self._info(position.ledger_id)
        )
        if info is not None:
            info.size += len(data)
        self._cache.put(position, data)
        self._new_entries.notify()

    def _needs_roll(self) -> bool:
        return self._writer is None or rollover.is_full(self._writer, self._writer_created, self.config)

    async def _roll(self) -> None:
        """Close the current ledger (after its adds complete) and start a new one; the caller holds
        the write lock."""
        await self._close_writer()
        await self._start_ledger()
        self._background.spawn(self._trim_quietly())

    async def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        if self._last_add is not None:
            with contextlib.suppress(BKError):
                await asyncio.shield(self._last_add)
        info = self._info(writer.ledger_id)
        assert info is not None
        try:
            metadata = await writer.close()
        except LedgerFencedError as exc:
            raise self.fenced(f"ledger {writer.ledger_id} was fenced") from exc
        except BKError as exc:
            log.warning("%s: ledger %d failed (%s); recovering it", self.name, writer.ledger_id, exc)
            try:
                await self._recover(info)
            except ManagedLedgerError:
                self._writer, self._writer_failed = writer, True  # try again at the next add
                raise
            self._note_recovered_end(info)
        else:
            info.entries = metadata.last_entry_id + 1
            info.timestamp_ms = _now_ms()
        log.info("%s: ledger %d closed at %d entries", self.name, writer.ledger_id, info.entries)

    def _note_recovered_end(self, info: LedgerInfo) -> None:
        # Recovery may find entries written but never confirmed to us: they are part of the log.
        if info.entries > 0:
            end = Position(info.ledger_id, info.entries - 1)
            if self._last_confirmed is None or end > self._last_confirmed:
                self._last_confirmed = end

    # -- state ----------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed or self._fencing.fenced

    @property
    def is_fenced(self) -> bool:
        return self._fencing.fenced

    @property
    def is_terminated(self) -> bool:
        return self._record.terminated_at is not None

    @property
    def last_confirmed_entry(self) -> Position | None:
        return self._last_confirmed

    @property
    def number_of_entries(self) -> int:
        return sum(self._entries_of(i) for i in self._record.ledgers)

    @property
    def total_size(self) -> int:
        return sum(i.size for i in self._record.ledgers)

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return list(self._record.ledgers)

    def _info(self, ledger_id: int) -> LedgerInfo | None:
        return self._span().info(ledger_id)

    def _entries_of(self, info: LedgerInfo) -> int:
        if info.entries >= 0:
            return info.entries
        if self._writer is not None and info.ledger_id == self._writer.ledger_id:
            return self._writer.last_add_confirmed + 1
        return 0

    # -- positions (span.py) ----------------------------------------------------------------------
    def _span(self) -> Span:
        return Span(self._record.ledgers, self._entries_of, self._last_confirmed)

    def first_position(self) -> Position:
        """Where reading from the earliest starts (an entry, or the next one to be written)."""
        return self._span().first_position()

    def before_first(self) -> Position:
        """The mark-delete position of a cursor that has read nothing."""
        return self._span().before_first()

    def valid_position(self, position: Position) -> Position:
        return self._span().valid_position(position)

    def next_position(self, position: Position) -> Position:
        return self._span().next_position(position)

    def previous_position(self, position: Position) -> Position | None:
        return self._span().previous_position(position)

    def has_entry(self, position: Position) -> bool:
        return self._span().has_entry(position)

    def count_entries_after(self, position: Position) -> int:
        return self._span().count_entries_after(position)

    def count_entries_between(self, first: Position, last: Position) -> int:
        return self._span().count_entries_between(first, last)

    # -- reading --------------------------------------------------------------------------------
    async def read_entries(
        self, start: Position, max_entries: int, max_bytes: int | None = None
    ) -> list[Entry]:
        """Up to ``max_entries`` confirmed entries from ``start`` on, across ledgers; with
        ``max_bytes``, stops before exceeding it (but returns at least one entry)."""
        return await reads.read_entries(self._span(), self._read_range, start, max_entries, max_bytes)

    async def read_entry(self, position: Position) -> Entry | None:
        """The entry at ``position``, or None when there is none (yet, or any more)."""
        return await reads.read_entry(self._span(), self._read_range, position)

    async def read_positions(self, positions: list[Position]) -> list[Entry]:
        """The entries at ``positions`` (sorted), those that exist, reading runs together."""
        return await reads.read_positions(self._span(), self._read_range, positions)

    async def _read_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        cached = self._cache.get_range(ledger_id, first, last)
        if all(data is not None for data in cached):
            return [Entry(Position(ledger_id, first + i), d) for i, d in enumerate(cached) if d is not None]
        writer = self._writer
        if writer is None or ledger_id != writer.ledger_id:
            return await self._readers.read(ledger_id, first, last)
        try:
            raw = await writer.read(first, last)
        except BKError as exc:
            raise ManagedLedgerError(f"cannot read {self.name} {ledger_id}:{first}..{last}: {exc}") from exc
        return [Entry(Position(ledger_id, e.entry_id), e.payload) for e in raw]

    def wait_for_new_entries(self) -> asyncio.Future[None]:
        """A future that resolves at the next add (each caller gets its own: cancelling it
        disturbs no other waiter). Cancelled when the managed ledger closes."""
        return self._new_entries.wait(closed=self.closed)

    async def find_first_position(self, predicate: Callable[[Entry], bool]) -> Position | None:
        """The first entry for which ``predicate`` holds (it then holds for every later one)."""
        return await reads.find_first(self._span(), self._read_range, predicate)

    # -- cursors --------------------------------------------------------------------------------
    async def open_cursor(
        self, name: str, initial_position: InitialPosition = InitialPosition.LATEST
    ) -> ManagedCursor:
        """The durable cursor ``name``; a new one starts at ``initial_position``, an existing one
        where it was left (also after a restart)."""
        return await self._cursors.open(name, initial_position)

    @property
    def cursors(self) -> dict[str, ManagedCursor]:
        """The durable cursors, by name."""
        return self._cursors.by_name

    def new_non_durable_cursor(
        self, start: Position | InitialPosition, *, inclusive: bool = True
    ) -> ManagedCursor:
        """A reader's cursor, kept in memory only, reading from ``start`` (the entry at a
        position ``start`` too, if ``inclusive``). It does not hold back retention."""
        return ManagedCursor.reader(self, start, inclusive=inclusive)

    async def delete_cursor(self, name: str) -> None:
        await self._cursors.delete(name)
        await self._trim_quietly()

    def cursor_moved_to_ledger(self) -> None:
        """A durable cursor's mark-delete position entered a later ledger: one may be consumed."""
        self._background.spawn(self._trim_quietly())

    # -- retention ------------------------------------------------------------------------------
    async def trim(self) -> list[int]:
        """Delete the closed ledgers every durable cursor has consumed, as far as retention allows:
        a consumed ledger goes once it was closed longer ago than the retention time, or while
        the consumed data kept exceeds the retention size. Returns the deleted ledger ids."""
        if self._fencing.fenced or self._cursors.released:
            return []

        def consumed(ledgers: list[LedgerInfo]) -> list[LedgerInfo]:
            marks = [c.mark_delete_position for c in self.cursors.values()]
            return consumed_beyond_retention(ledgers, marks, self.config, _now_ms())

        doomed = await self._record.remove(consumed)
        if not doomed:
            return []
        for info in doomed:
            self._forget_ledger(info.ledger_id)
            self._delete_ledger_later(info.ledger_id)
        log.info("%s: deleted consumed ledgers %s", self.name, [i.ledger_id for i in doomed])
        return [i.ledger_id for i in doomed]

    def _forget_ledger(self, ledger_id: int) -> None:
        self._readers.forget(ledger_id)
        self._cache.forget_ledger(ledger_id)

    async def _trim_quietly(self) -> None:
        try:
            await self.trim()
        except ManagedLedgerError as exc:
            log.warning("%s: trimming failed: %s", self.name, exc)

    def maintain(self) -> None:
        """The factory's periodic check (``MaintenanceTimer``): roll a ledger past its maximum
        age, trim consumed ledgers. Started only when there may be work, one at a time; in the
        background tasks, so closing waits for it rather than leaving a metadata write half done."""
        if self._maintaining or self.closed or not self._may_need_maintenance():
            return
        self._maintaining = True
        self._background.spawn(self._maintain_once())

    def _may_need_maintenance(self) -> bool:
        # Retention only ever lets go of closed ledgers: the one being written alone needs nothing
        # until it is old enough to roll.
        if len(self._record.ledgers) > 1:
            return True
        return self._writer is not None and not self._write_lock.locked() and self._needs_roll()

    async def _maintain_once(self) -> None:
        try:
            if self._writer is not None and not self._write_lock.locked() and self._needs_roll():
                async with self._write_lock:
                    if not self.closed and not self.is_terminated and self._needs_roll():
                        await self._roll()
            await self.trim()
        except ManagedLedgerError as exc:
            log.warning("%s: maintenance failed: %s", self.name, exc)
        finally:
            self._maintaining = False

    def _delete_ledger_later(self, ledger_id: int) -> None:
        self._background.spawn(delete_ledger(self._client, self.name, ledger_id))

    async def settle(self) -> None:
        """Wait for background work (ledger deletions, trims) started so far."""
        await self._background.wait()

    # -- properties -----------------------------------------------------------------------------
    @property
    def properties(self) -> dict[str, str]:
        """What the managed ledger's user keeps with it (a copy)."""
        return dict(self._record.properties)

    async def set_property(self, key: str, value: str) -> None:
        """Keep ``key`` = ``value`` with the managed ledger, durably before this returns."""
        self._check_writable()
        await self._record.set_property(key, value)

    # -- closing --------------------------------------------------------------------------------
    async def terminate(self) -> Position | None:
        """No more entries may be added, ever (Pulsar's topic termination); returns the last one."""
        async with self._write_lock:
            if self._record.terminated_at is None:
                self._check_writable()
                await self._close_writer()
                self._record.terminated_at = self._last_confirmed or self.before_first()
                await self._record.save_locked()
        return self._last_confirmed

    async def close(self) -> None:
        """Persist every cursor, close the ledger being written and record where it ends."""
        if self._closed:
            return
        async with self._write_lock:
            self._closed = True
            await self._cursors.close()
            if not self._fencing.fenced:
                try:
                    await self._close_writer()
                    await self._record.save_locked()
                except (ManagedLedgerError, BKError) as exc:
                    # The next owner recovers the open ledger: nothing confirmed is lost.
                    log.warning("%s: not closed cleanly: %s", self.name, exc)
        self._new_entries.cancel_all()
        await self.settle()
        self._cursors.release()

    async def delete(self) -> None:
        """Remove the managed ledger: its ledgers, cursors and metadata."""
        await self.close()
        for info in self._record.ledgers:
            self._delete_ledger_later(info.ledger_id)
        await self._cursors.delete_all()
        await self.settle()
        await meta_store.delete(self.store, self.name)
