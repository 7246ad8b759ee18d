"""A managed ledger: a topic's append-only log over a list of BookKeeper ledgers.

Metadata (the list of ledgers with their entry counts, sizes and close times) is a JSON document
at ``/managed-ledgers/<name>``, always written with compare-and-set on its version: a broker that
lost the managed ledger to another one finds out at its next metadata write, and its writes to
the (fenced) ledger fail before that.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import unquote

from magnetar.bookie.client import (
    BKError,
    LedgerClient,
    LedgerFencedError,
    LedgerHandle,
    NoSuchLedgerError,
    ReadHandle,
)
from magnetar.broker.managed_ledger import meta_store
from magnetar.broker.managed_ledger.config import ManagedLedgerConfig
from magnetar.broker.managed_ledger.cursor import ManagedCursor
from magnetar.broker.managed_ledger.errors import (
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
)
from magnetar.broker.managed_ledger.meta_store import LedgerInfo, cursor_path, ledger_path, validate_name
from magnetar.broker.managed_ledger.position import Entry, InitialPosition, Position
from magnetar.common.metadata import (
    BadVersionError,
    MetadataError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
)

log = logging.getLogger(__name__)

MB = 1024 * 1024

_reader_ids = itertools.count(1)


def _now_ms() -> int:
    return int(time.time() * 1000)


class ManagedLedger:
    def __init__(
        self, name: str, store: MetadataStore, client: LedgerClient, config: ManagedLedgerConfig
    ) -> None:
        self.name = validate_name(name)
        self.store = store
        self._client = client
        self.config = config
        self._ledgers: list[LedgerInfo] = []
        #: writes the ledger list by compare-and-set, riding out answers lost to a store blip
        self._node = meta_store.NodeWriter(store, ledger_path(self.name))
        self._terminated_at: Position | None = None
        self._writer: LedgerHandle | None = None
        self._writer_failed = False
        self._writer_created = 0.0
        self._write_lock = asyncio.Lock()  # orders adds and ledger rolls
        self._metadata_lock = asyncio.Lock()  # one metadata read-modify-CAS at a time
        self._cursor_lock = asyncio.Lock()
        self._last_add: asyncio.Future[int] | None = None
        self._last_confirmed: Position | None = None
        self._readers: dict[int, ReadHandle] = {}
        self._cache: OrderedDict[Position, bytes] = OrderedDict()
        self._cache_bytes = 0
        self._waiters: list[asyncio.Future[None]] = []
        self.cursors: dict[str, ManagedCursor] = {}
        self._closed = False
        self._fenced = False
        self._maintenance: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        #: a ledger created ahead of the open (by the factory's ``prepare``: a transfer's
        #: destination makes it while the source still writes), taken by the open instead of
        #: creating one, which keeps its round trips out of the handover
        self.prepared_writer: LedgerHandle | None = None
        self.entries_added = 0
        self.bytes_added = 0

    # -- opening --------------------------------------------------------------------------------
    async def open(self) -> None:
        """Load the metadata, fence and close what a previous owner left open, start a new ledger."""
        await self._load()
        for info in self._ledgers:
            if info.entries < 0:
                await self._recover(info)
        for info in [i for i in self._ledgers if i.entries == 0]:
            self._ledgers.remove(info)
            self._delete_ledger_later(info.ledger_id)
        last = next((i for i in reversed(self._ledgers) if i.entries > 0), None)
        if last is not None:
            self._last_confirmed = Position(last.ledger_id, last.entries - 1)
        if self._terminated_at is None:
            await self._start_ledger()
        else:
            await self._save_locked()
        for cursor_name in await self._cursor_names():
            cursor = ManagedCursor(self, cursor_name, durable=True)
            await cursor.load()
            self.cursors[cursor_name] = cursor
        self._maintenance = asyncio.get_running_loop().create_task(self._maintain())

    async def _load(self) -> None:
        listed = await meta_store.load(self.store, self.name)
        self._ledgers, self._terminated_at = listed.ledgers, listed.terminated_at
        self._node.version = listed.version

    async def _save_locked(self) -> None:
        async with self._metadata_lock:
            await self._save()

    async def _save(self) -> None:
        """Write the metadata; the caller holds the metadata lock."""
        try:
            await self._node.write(meta_store.encode(self._ledgers, self._terminated_at))
        except (BadVersionError, NodeExistsError, NoNodeError) as exc:
            raise self.fenced(f"its metadata changed under it ({exc})") from exc
        except MetadataError as exc:  # the store is unreachable: a later write tries again
            raise ManagedLedgerError(f"cannot record the ledgers of {self.name}: {exc}") from exc

    def fenced(self, why: str) -> ManagedLedgerFencedError:
        """Mark this instance deposed (another broker owns the managed ledger now)."""
        if not self._fenced:
            log.warning("managed ledger %s fenced: %s", self.name, why)
        self._fenced = True
        return ManagedLedgerFencedError(
            f"managed ledger {self.name} was opened by another broker; this instance can no longer "
            f"write ({why})"
        )

    async def _recover(self, info: LedgerInfo) -> None:
        """Fence a ledger left open (by a previous owner or a failed writer) and learn its end."""
        try:
            handle = await self._client.open_ledger(info.ledger_id)
        except NoSuchLedgerError:
            info.entries = 0
            return
        except BKError as exc:
            raise ManagedLedgerError(
                f"cannot recover ledger {info.ledger_id} of managed ledger {self.name}: {exc}"
            ) from exc
        info.entries = handle.last_add_confirmed + 1
        info.size = max(info.size, handle.metadata.length)
        info.timestamp_ms = _now_ms()
        self._readers[info.ledger_id] = handle

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
        async with self._metadata_lock:
            self._ledgers.append(LedgerInfo(writer.ledger_id, -1, 0, 0))
            try:
                await self._save()
            except ManagedLedgerFencedError:
                self._ledgers.pop()
                self._delete_ledger_later(writer.ledger_id)
                raise
            except ManagedLedgerError:
                self._ledgers.pop()
                self.prepared_writer = writer  # the next add records it again
                raise
        self._writer, self._writer_failed, self._writer_created = writer, False, time.monotonic()
        log.info("%s: writing to ledger %d", self.name, writer.ledger_id)

    async def _take_prepared_writer(self) -> LedgerHandle | None:
        writer, self.prepared_writer = self.prepared_writer, None
        if writer is not None and any(i.ledger_id >= writer.ledger_id for i in self._ledgers):
            # Positions order by ledger id: a ledger created before the last one cannot follow it
            # (the previous owner rolled after it was prepared).
            with contextlib.suppress(BKError):
                await writer.close()
            self._delete_ledger_later(writer.ledger_id)
            return None
        return writer

    async def _cursor_names(self) -> list[str]:
        try:
            return [unquote(n) for n in await self.store.children(f"{ledger_path(self.name)}/cursors")]
        except NoNodeError:
            return []

    # -- writing --------------------------------------------------------------------------------
    async def add_entry(self, data: bytes) -> Position:
        """Append; returns once Qa bookies have the entry. Concurrent calls complete in order."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"add_entry takes bytes, not {type(data).__name__}")
        payload = bytes(data)
        async with self._write_lock:
            self._check_writable()
            if self._writer_failed or self._needs_roll():
                await self._roll()
            writer = self._writer
            assert writer is not None
            future = writer.add_entry_async(payload)
            self._last_add = future
        try:
            entry_id = await future
        except LedgerFencedError as exc:
            raise self.fenced(f"ledger {writer.ledger_id} was fenced") from exc
        except BKError as exc:
            # The next add closes this ledger (recovering what it holds) and starts a new one.
            self._writer_failed = True
            raise ManagedLedgerError(f"cannot write to {self.name}: {exc}") from exc
        position = Position(writer.ledger_id, entry_id)
        self._added(position, payload)
        return position

    def _check_writable(self) -> None:
        if self._fenced:
            raise ManagedLedgerFencedError(
                f"managed ledger {self.name} was opened by another broker; this instance can no longer write"
            )
        if self._closed:
            raise ManagedLedgerClosedError(f"managed ledger {self.name} is closed")
        if self._terminated_at is not None:
            raise ManagedLedgerTerminatedError(
                f"managed ledger {self.name} was terminated at {self._terminated_at}"
            )

    def _added(self, position: Position, data: bytes) -> None:
        if self._last_confirmed is None or position > self._last_confirmed:
            self._last_confirmed = position
        self.entries_added += 1
        self.bytes_added += len(data)
        info = self._info(position.ledger_id)
        if info is not None:
            info.size += len(data)
        self._cache_put(position, data)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _needs_roll(self) -> bool:
        writer = self._writer
        if writer is None:
            return True
        size = writer.length
        if size >= self.config.max_size_per_ledger_mb * MB:
            return True
        if writer.last_add_confirmed < 0:
            return False
        age_min = (time.monotonic() - self._writer_created) / 60
        if (
            self.config.max_ledger_rollover_time_minutes > 0
            and age_min >= self.config.max_ledger_rollover_time_minutes
        ):
            return True
        full = writer.last_add_confirmed + 1 >= self.config.max_entries_per_ledger
        return full and age_min >= self.config.min_ledger_rollover_time_minutes

    async def _roll(self) -> None:
        """Close the current ledger (after its adds complete) and start a new one; the caller holds
        the write lock."""
        await self._close_writer()
        await self._start_ledger()
        self._spawn(self._trim_quietly())

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
        return self._closed or self._fenced

    @property
    def is_fenced(self) -> bool:
        return self._fenced

    @property
    def is_terminated(self) -> bool:
        return self._terminated_at is not None

    @property
    def last_confirmed_entry(self) -> Position | None:
        return self._last_confirmed

    @property
    def number_of_entries(self) -> int:
        return sum(self._entries_of(i) for i in self._ledgers)

    @property
    def total_size(self) -> int:
        return sum(i.size for i in self._ledgers)

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return list(self._ledgers)

    def _info(self, ledger_id: int) -> LedgerInfo | None:
        return next((i for i in self._ledgers if i.ledger_id == ledger_id), None)

    def _entries_of(self, info: LedgerInfo) -> int:
        if info.entries >= 0:
            return info.entries
        if self._writer is not None and info.ledger_id == self._writer.ledger_id:
            return self._writer.last_add_confirmed + 1
        return 0

    # -- positions ------------------------------------------------------------------------------
    def first_position(self) -> Position:
        """Where reading from the earliest starts (an entry, or the next one to be written)."""
        for info in self._ledgers:
            if self._entries_of(info) > 0:
                return Position(info.ledger_id, 0)
        return Position(self._ledgers[-1].ledger_id, 0) if self._ledgers else Position(-1, 0)

    def before_first(self) -> Position:
        """The mark-delete position of a cursor that has read nothing."""
        first = self.first_position()
        return Position(first.ledger_id, first.entry_id - 1)

    def valid_position(self, position: Position) -> Position:
        """The first position at or after ``position`` where an entry is, or will be written."""
        for index, info in enumerate(self._ledgers):
            if info.ledger_id < position.ledger_id:
                continue
            entries = self._entries_of(info)
            start = max(position.entry_id, 0) if info.ledger_id == position.ledger_id else 0
            if start < entries:
                return Position(info.ledger_id, start)
            if index == len(self._ledgers) - 1:
                return Position(info.ledger_id, entries)
        if not self._ledgers:
            return position
        last = self._ledgers[-1]
        return Position(last.ledger_id, self._entries_of(last))

    def next_position(self, position: Position) -> Position:
        return self.valid_position(Position(position.ledger_id, position.entry_id + 1))

    def previous_position(self, position: Position) -> Position | None:
        """The entry before ``position`` (across ledgers), None before the first."""
        if position.entry_id > 0:
            return Position(position.ledger_id, position.entry_id - 1)
        for info in reversed(self._ledgers):
            entries = self._entries_of(info)
            if info.ledger_id < position.ledger_id and entries > 0:
                return Position(info.ledger_id, entries - 1)
        return None

    def has_entry(self, position: Position) -> bool:
        if self._last_confirmed is None or position > self._last_confirmed or position.entry_id < 0:
            return False
        info = self._info(position.ledger_id)
        return info is not None and position.entry_id < self._entries_of(info)

    def count_entries_after(self, position: Position) -> int:
        """Confirmed entries strictly after ``position``."""
        count = 0
        for info in self._ledgers:
            entries = self._entries_of(info)
            if info.ledger_id > position.ledger_id:
                count += entries
            elif info.ledger_id == position.ledger_id:
                count += max(0, entries - position.entry_id - 1)
        return count

    def count_entries_between(self, first: Position, last: Position) -> int:
        """Entries from ``first`` to ``last``, both included."""
        if first.ledger_id == last.ledger_id:  # the common case, without walking the ledgers
            info = self._info(first.ledger_id)
            if info is None:
                return 0
            end = min(last.entry_id, self._entries_of(info) - 1)
            return max(0, end - max(first.entry_id, 0) + 1)
        before = Position(first.ledger_id, first.entry_id - 1)
        return max(0, self.count_entries_after(before) - self.count_entries_after(last))

    # -- reading --------------------------------------------------------------------------------
    async def read_entries(
        self, start: Position, max_entries: int, max_bytes: int | None = None
    ) -> list[Entry]:
        """Up to ``max_entries`` confirmed entries from ``start`` on, across ledgers; with
        ``max_bytes``, stops before exceeding it (but returns at least one entry)."""
        _check_limits(max_entries, max_bytes)
        entries: list[Entry] = []
        size = 0
        position = self.valid_position(start)
        while len(entries) < max_entries and self.has_entry(position):
            info = self._info(position.ledger_id)
            assert info is not None
            assert self._last_confirmed is not None
            last = min(self._entries_of(info) - 1, position.entry_id + max_entries - len(entries) - 1)
            if self._last_confirmed.ledger_id == position.ledger_id:
                # Not past what add_entry has handed back yet: those entries are in the cache,
                # the ones the writer confirmed a moment later are not (yet).
                last = min(last, self._last_confirmed.entry_id)
            for entry in await self._read_range(position.ledger_id, position.entry_id, last):
                if max_bytes is not None and entries and size + len(entry.data) > max_bytes:
                    return entries
                entries.append(entry)
                size += len(entry.data)
            position = self.next_position(Position(position.ledger_id, last))
        return entries

    async def read_entry(self, position: Position) -> Entry | None:
        """The entry at ``position``, or None when there is none (yet, or any more)."""
        if not self.has_entry(position):
            return None
        return (await self._read_range(position.ledger_id, position.entry_id, position.entry_id))[0]

    async def read_positions(self, positions: list[Position]) -> list[Entry]:
        """The entries at ``positions`` (sorted), those that exist, reading runs together."""
        entries: list[Entry] = []
        run: list[Position] = []
        for position in [p for p in positions if self.has_entry(p)] + [Position(-2, -2)]:
            if run and (position.ledger_id != run[-1].ledger_id or position.entry_id != run[-1].entry_id + 1):
                entries += await self._read_range(run[0].ledger_id, run[0].entry_id, run[-1].entry_id)
                run = []
            run.append(position)
        return entries

    async def _read_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        cached = [self._cache.get(Position(ledger_id, e)) for e in range(first, last + 1)]
        if all(data is not None for data in cached):
            return [Entry(Position(ledger_id, first + i), d) for i, d in enumerate(cached) if d is not None]
        try:
            if self._writer is not None and ledger_id == self._writer.ledger_id:
                raw = await self._writer.read(first, last)
            else:
                raw = await (await self._reader(ledger_id)).read(first, last)
        except BKError as exc:
            raise ManagedLedgerError(f"cannot read {self.name} {ledger_id}:{first}..{last}: {exc}") from exc
        return [Entry(Position(ledger_id, e.entry_id), e.payload) for e in raw]

    async def _reader(self, ledger_id: int) -> ReadHandle:
        handle = self._readers.get(ledger_id)
        if handle is None:
            handle = await self._client.open_ledger_no_recovery(ledger_id)
            self._readers[ledger_id] = handle
        return handle

    def _cache_put(self, position: Position, data: bytes) -> None:
        limit = self.config.cache_size_mb * MB
        if limit <= 0:
            return
        self._cache[position] = data
        self._cache_bytes += len(data)
        while self._cache_bytes > limit and self._cache:
            _, evicted = self._cache.popitem(last=False)
            self._cache_bytes -= len(evicted)

    def wait_for_new_entries(self) -> asyncio.Future[None]:
        """A future that resolves at the next add (each caller gets its own: cancelling it
        disturbs no other waiter). Cancelled when the managed ledger closes."""
        if len(self._waiters) > 64:
            self._waiters = [w for w in self._waiters if not w.done()]
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.closed:
            waiter.cancel()
        else:
            self._waiters.append(waiter)
        return waiter

    async def find_first_position(self, predicate: Callable[[Entry], bool]) -> Position | None:
        """The first entry for which ``predicate`` holds, assuming it then holds for every later
        one (a binary search, as Pulsar's seek by publish time); None if it holds for none."""
        sizes = [(i.ledger_id, self._entries_of(i)) for i in self._ledgers if self._entries_of(i) > 0]
        total = sum(n for _, n in sizes)

        def at(index: int) -> Position:
            for ledger_id, n in sizes:
                if index < n:
                    return Position(ledger_id, index)
                index -= n
            raise IndexError(index)

        low, high = 0, total
        while low < high:
            middle = (low + high) // 2
            entry = await self.read_entry(at(middle))
            if entry is not None and predicate(entry):
                high = middle
            else:
                low = middle + 1
        return at(low) if low < total else None

    # -- cursors --------------------------------------------------------------------------------
    async def open_cursor(
        self, name: str, initial_position: InitialPosition = InitialPosition.LATEST
    ) -> ManagedCursor:
        """The durable cursor ``name``; a new one starts at ``initial_position``, an existing one
        where it was left (also after a restart)."""
        if not isinstance(name, str) or not name:
            raise ManagedLedgerError(f"invalid cursor name {name!r}")
        initial = InitialPosition(initial_position)
        async with self._cursor_lock:
            cursor = self.cursors.get(name)
            if cursor is not None:
                return cursor
            if self.closed:
                raise ManagedLedgerClosedError(f"managed ledger {self.name} is closed")
            cursor = ManagedCursor(self, name, durable=True)
            if initial is InitialPosition.EARLIEST or self._last_confirmed is None:
                cursor.reset_to(self.before_first())
            else:
                cursor.reset_to(self._last_confirmed)
            await cursor.create()
            self.cursors[name] = cursor
            return cursor

    def new_non_durable_cursor(
        self, start: Position | InitialPosition, *, inclusive: bool = True
    ) -> ManagedCursor:
        """A reader's cursor, kept in memory only, reading from ``start`` (the entry at a
        position ``start`` too, if ``inclusive``). It does not hold back retention."""
        if isinstance(start, Position):
            mark_delete = Position(start.ledger_id, start.entry_id - 1) if inclusive else start
        elif InitialPosition(start) is InitialPosition.EARLIEST or self._last_confirmed is None:
            mark_delete = self.before_first()
        else:
            mark_delete = self._last_confirmed
        cursor = ManagedCursor(self, f"reader-{next(_reader_ids)}", durable=False)
        cursor.reset_to(mark_delete)
        return cursor

    async def delete_cursor(self, name: str) -> None:
        async with self._cursor_lock:
            cursor = self.cursors.pop(name, None)
            if cursor is not None:
                await cursor.close(flush=False)
            with contextlib.suppress(NoNodeError):
                await self.store.delete(cursor_path(self.name, name))
        await self._trim_quietly()

    def cursor_moved_to_ledger(self) -> None:
        """A durable cursor's mark-delete position entered a later ledger: one may be consumed."""
        self._spawn(self._trim_quietly())

    # -- retention ------------------------------------------------------------------------------
    async def trim(self) -> list[int]:
        """Delete the closed ledgers every durable cursor has consumed, as far as retention allows:
        a consumed ledger goes once it was closed longer ago than the retention time, or while
        the consumed data kept exceeds the retention size. Returns the deleted ledger ids."""
        if self._fenced:
            return []
        async with self._metadata_lock:
            doomed = self._consumed_beyond_retention()
            if not doomed:
                return []
            kept = [i for i in self._ledgers if i not in doomed]
            previous, self._ledgers = self._ledgers, kept
            try:
                await self._save()
            except ManagedLedgerFencedError:
                self._ledgers = previous
                raise
        for info in doomed:
            self._forget_ledger(info.ledger_id)
            self._delete_ledger_later(info.ledger_id)
        log.info("%s: deleted consumed ledgers %s", self.name, [i.ledger_id for i in doomed])
        return [i.ledger_id for i in doomed]

    def _consumed_beyond_retention(self) -> list[LedgerInfo]:
        time_ms = self.config.retention_time_minutes * 60_000
        size_limit = self.config.retention_size_mb * MB
        if time_ms < 0 and size_limit < 0:
            return []
        marks = [c.mark_delete_position for c in self.cursors.values()]
        slowest = min(marks) if marks else None
        total = self.total_size
        now = _now_ms()
        doomed: list[LedgerInfo] = []
        for info in self._ledgers[:-1]:  # never the ledger being written (or the last one)
            if info.entries < 0:
                break
            consumed = (
                slowest is None
                or info.ledger_id < slowest.ledger_id
                or (info.ledger_id == slowest.ledger_id and slowest.entry_id >= info.entries - 1)
            )
            expired = time_ms >= 0 and now - info.timestamp_ms >= time_ms
            over_size = size_limit >= 0 and total > size_limit
            if not consumed or not (expired or over_size):
                break
            doomed.append(info)
            total -= info.size
        return doomed

    def _forget_ledger(self, ledger_id: int) -> None:
        self._readers.pop(ledger_id, None)
        for position in [p for p in self._cache if p.ledger_id == ledger_id]:
            self._cache_bytes -= len(self._cache.pop(position))

    async def _trim_quietly(self) -> None:
        try:
            await self.trim()
        except ManagedLedgerError as exc:
            log.warning("%s: trimming failed: %s", self.name, exc)

    async def _maintain(self) -> None:
        """Periodically: trim consumed ledgers, roll a ledger past its maximum age."""
        while not self.closed:
            await asyncio.sleep(self.config.retention_check_interval_seconds)
            # Shielded: closing stops the loop, never a metadata write half done.
            await asyncio.shield(self._spawn(self._maintain_once()))

    async def _maintain_once(self) -> None:
        try:
            if self._writer is not None and not self._write_lock.locked() and self._needs_roll():
                async with self._write_lock:
                    if not self.closed and self._terminated_at is None and self._needs_roll():
                        await self._roll()
            await self.trim()
        except ManagedLedgerError as exc:
            log.warning("%s: maintenance failed: %s", self.name, exc)

    def _delete_ledger_later(self, ledger_id: int) -> None:
        async def delete() -> None:
            try:
                await self._client.delete_ledger(ledger_id)
            except NoSuchLedgerError:
                pass
            except BKError as exc:  # an orphan: no managed ledger refers to it any more
                log.warning("%s: could not delete ledger %d: %s", self.name, ledger_id, exc)

        self._spawn(delete())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def settle(self) -> None:
        """Wait for background work (ledger deletions, trims) started so far."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    # -- closing --------------------------------------------------------------------------------
    async def terminate(self) -> Position | None:
        """No more entries may be added, ever (Pulsar's topic termination); returns the last one."""
        async with self._write_lock:
            if self._terminated_at is None:
                self._check_writable()
                await self._close_writer()
                self._terminated_at = self._last_confirmed or self.before_first()
                await self._save_locked()
        return self._last_confirmed

    async def close(self) -> None:
        """Persist every cursor, close the ledger being written and record where it ends."""
        if self._closed:
            return
        async with self._write_lock:
            self._closed = True
            if self._maintenance is not None:
                self._maintenance.cancel()
            for cursor in list(self.cursors.values()):
                try:
                    await cursor.close()
                except ManagedLedgerError as exc:
                    log.warning("%s: cursor %s not persisted at close: %s", self.name, cursor.name, exc)
            if not self._fenced:
                try:
                    await self._close_writer()
                    await self._save_locked()
                except (ManagedLedgerError, BKError) as exc:
                    # The next owner recovers the open ledger: nothing confirmed is lost.
                    log.warning("%s: not closed cleanly: %s", self.name, exc)
        for waiter in self._waiters:
            waiter.cancel()
        self._waiters = []
        await self.settle()

    async def delete(self) -> None:
        """Remove the managed ledger: its ledgers, cursors and metadata."""
        await self.close()
        for info in self._ledgers:
            self._delete_ledger_later(info.ledger_id)
        await self.settle()
        with contextlib.suppress(NoNodeError):
            await self.store.delete(ledger_path(self.name), recursive=True)


def _check_limits(max_entries: int, max_bytes: int | None) -> None:
    if not isinstance(max_entries, int) or max_entries < 1:
        raise ValueError(f"max_entries must be a positive integer, got {max_entries!r}")
    if max_bytes is not None and max_bytes < 1:
        raise ValueError(f"max_bytes must be positive, got {max_bytes!r}")
