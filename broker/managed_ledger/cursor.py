"""A cursor: where a subscription is in its managed ledger.

State is the mark-delete position (everything at or before it is acknowledged), the ranges
individually acknowledged after it, and the read position (the next entry to dispatch). A durable
cursor persists the first two (and the mark-delete properties) through its ``CursorStorage``
(cursor_storage.py; an owner's is the cursor ledger of cursor_ledger.py), at most
``cursor_flush_interval_ms`` after every change, at once at a seek, and at close. The broker that
opens the managed ledger takes every cursor over, so a deposed owner's later write fails instead
of clobbering it. The read position is not persisted: after a restart reading resumes after the mark-delete
position, skipping acknowledged ranges, so unacknowledged entries are redelivered and
acknowledged ones are not.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable
from typing import Protocol

from magnetar.broker.managed_ledger.acked_ranges import AckedRanges
from magnetar.broker.managed_ledger.config import ManagedLedgerConfig
from magnetar.broker.managed_ledger.cursor_storage import CursorState, CursorStorage
from magnetar.broker.managed_ledger.errors import (
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
)
from magnetar.broker.managed_ledger.position import Entry, InitialPosition, Position

_reader_ids = itertools.count(1)


class CompactedEntries(Protocol):
    """What a ``read_compacted`` cursor reads up to the compaction horizon instead of the ledger
    (broker/compaction): the latest message of each key, at its original position."""

    @property
    def horizon(self) -> Position | None: ...

    def entries_from(self, position: Position, limit: int) -> list[Entry]: ...

    def entries_at(self, positions: list[Position]) -> list[Entry]: ...

    def last_position(self) -> Position | None:
        """The last entry kept (None: none)."""
        ...


class CursorLedger(Protocol):
    """What a cursor uses of its managed ledger (writable, in memory, or PIP-63's read-only one).
    A durable cursor's state is persisted through the storage it is given, not through this."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> ManagedLedgerConfig: ...

    @property
    def is_fenced(self) -> bool: ...

    @property
    def last_confirmed_entry(self) -> Position | None: ...

    def fenced(self, why: str) -> ManagedLedgerFencedError: ...

    def before_first(self) -> Position: ...

    def valid_position(self, position: Position) -> Position: ...

    def next_position(self, position: Position) -> Position: ...

    def has_entry(self, position: Position) -> bool: ...

    def count_entries_after(self, position: Position) -> int: ...

    def count_entries_between(self, first: Position, last: Position) -> int: ...

    async def read_entries(
        self, start: Position, max_entries: int, max_bytes: int | None = None
    ) -> list[Entry]: ...

    async def read_positions(self, positions: list[Position]) -> list[Entry]: ...

    def wait_for_new_entries(self) -> asyncio.Future[None]: ...

    def cursor_moved_to_ledger(self) -> None: ...


log = logging.getLogger(__name__)


class ManagedCursor:
    @classmethod
    async def create_durable(
        cls, ledger: CursorLedger, name: str, initial: InitialPosition, storage: CursorStorage
    ) -> ManagedCursor:
        """A new durable cursor at ``initial``, persisted in ``storage`` (or the one of that name
        that appeared meanwhile, taken over)."""
        cursor = cls(ledger, name, durable=True, storage=storage)
        last = ledger.last_confirmed_entry
        cursor.reset_to(
            ledger.before_first() if initial is InitialPosition.EARLIEST or last is None else last
        )
        await cursor.create()
        return cursor

    @classmethod
    def reader(
        cls, ledger: CursorLedger, start: Position | InitialPosition, *, inclusive: bool
    ) -> ManagedCursor:
        """A reader's cursor, in memory only, reading from ``start`` (the entry at a position
        ``start`` too, if ``inclusive``)."""
        last = ledger.last_confirmed_entry
        if isinstance(start, Position):
            mark_delete = Position(start.ledger_id, start.entry_id - 1) if inclusive else start
        elif InitialPosition(start) is InitialPosition.EARLIEST or last is None:
            mark_delete = ledger.before_first()
        else:
            mark_delete = last
        cursor = cls(ledger, f"reader-{next(_reader_ids)}", durable=False)
        cursor.reset_to(mark_delete)
        return cursor

    def __init__(
        self, ledger: CursorLedger, name: str, *, durable: bool, storage: CursorStorage | None = None
    ) -> None:
        """``storage``: where a durable cursor persists its state (None: it persists nothing
        itself, as a reader's cursor or a read-only owner's cache of one)."""
        self.ledger = ledger
        self.name = name
        self.durable = durable
        self.closed = False
        self.properties: dict[str, int] = {}
        #: set for read_compacted subscriptions and readers
        self.compacted: CompactedEntries | None = None
        self._mark_delete = Position(-1, -1)
        self._acked = AckedRanges(ledger.next_position)
        self._read_position = Position(-1, 0)
        self._epoch = 0  # bumped whenever the read position is reset under a read in flight
        self.storage = storage
        self._dirty = False
        self._flush_lock = asyncio.Lock()
        self._flush_task: asyncio.Task[None] | None = None
        self._warned_truncation = False

    def __repr__(self) -> str:
        return f"ManagedCursor({self.ledger.name}/{self.name}, mark_delete={self._mark_delete})"

    # -- state ----------------------------------------------------------------------------------
    @property
    def mark_delete_position(self) -> Position:
        return self._mark_delete

    @property
    def read_position(self) -> Position:
        return self.ledger.valid_position(self._read_position)

    @property
    def cursor_ledger(self) -> int:
        """The ledger a durable cursor persists its state in (-1: none, or not yet)."""
        return self.storage.ledger_id if self.storage is not None else -1

    @property
    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        """Acknowledged ranges after the mark-delete position, as inclusive (first, last) pairs."""
        return self._acked.ranges()

    @property
    def individually_deleted(self) -> list[Position]:
        """Every individually acknowledged position (for small listings; prefer the ranges)."""
        positions = []
        for first, last in self._acked:
            position = first
            while position <= last and self.ledger.has_entry(position):
                positions.append(position)
                position = self.ledger.next_position(position)
        return positions

    def is_acknowledged(self, position: Position) -> bool:
        return position <= self._mark_delete or position in self._acked

    @property
    def number_of_entries_in_backlog(self) -> int:
        """Entries not acknowledged (pulsar_msg_backlog, counted in entries)."""
        pending = self.ledger.count_entries_after(self._mark_delete)
        return max(0, pending - self._acked.count(self.ledger.count_entries_between))

    def has_more_entries(self) -> bool:
        return self.ledger.has_entry(self._acked.skip(self.ledger.valid_position(self._read_position)))

    def reset_to(self, mark_delete: Position) -> None:
        """Everything at or before ``mark_delete`` acknowledged, nothing after it; read from there."""
        self._mark_delete = mark_delete
        self._acked.clear()
        self._read_position = self.ledger.next_position(mark_delete)
        self._epoch += 1

    # -- reading --------------------------------------------------------------------------------
    async def read_entries(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """Up to ``max_entries`` unacknowledged entries from the read position on (with
        ``max_bytes``, no more bytes than that unless one entry alone is bigger); advances the
        read position past them. [] when there is nothing more to read (yet)."""
        found: list[Entry] = []
        size = 0
        epoch = self._epoch
        while len(found) < max_entries:
            served = self._read_compacted(max_entries - len(found))
            if served is not None:
                found += served
                continue
            start = self._acked.skip(self.ledger.valid_position(self._read_position))
            self._read_position = start
            budget = None if max_bytes is None else max(1, max_bytes - size)
            batch = await self.ledger.read_entries(start, max_entries - len(found), budget)
            if epoch != self._epoch:
                return []  # rewound or seeked meanwhile: this batch is not what is wanted now
            if not batch:
                break
            for entry in batch:
                if max_bytes is not None and found and size + len(entry.data) > max_bytes:
                    return found
                self._read_position = self.ledger.next_position(entry.position)
                if not self.is_acknowledged(entry.position):
                    found.append(entry)
                    size += len(entry.data)
        return found

    def read_compacted(self, compacted: CompactedEntries) -> None:
        """Read through ``compacted`` up to its horizon. A cursor at the very start (nothing read
        yet) starts before everything, since compacted entries may be older than the ledger's
        first (retention deletes what compaction made redundant)."""
        self.compacted = compacted
        if self._mark_delete == self.ledger.before_first() and not self._acked.ranges():
            self._mark_delete = Position(-1, -1)
            self._read_position = Position(-1, 0)
            self._epoch += 1

    def _read_compacted(self, limit: int) -> list[Entry] | None:
        """Entries of the compacted view while the read position is at or before its horizon
        (the read position moves past them, or past the horizon once none are left); None past
        the horizon or without a view."""
        horizon = self.compacted.horizon if self.compacted is not None else None
        if self.compacted is None or horizon is None or self._read_position > horizon:
            return None
        served = self.compacted.entries_from(self._read_position, limit)
        if not served:
            self._read_position = Position(horizon.ledger_id, horizon.entry_id + 1)
            return []
        self._read_position = Position(served[-1].position.ledger_id, served[-1].position.entry_id + 1)
        return [e for e in served if not self.is_acknowledged(e.position)]

    async def read_entries_or_wait(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """As ``read_entries``, but when caught up wait for the next entry (cancellable)."""
        while True:
            waiter = self.ledger.wait_for_new_entries()
            try:
                entries = await self.read_entries(max_entries, max_bytes)
                if entries:
                    return entries
                await asyncio.wait([waiter])
                if waiter.cancelled():
                    raise ManagedLedgerClosedError(f"managed ledger {self.ledger.name} was closed")
            finally:
                waiter.cancel()

    async def replay(self, positions: Iterable[Position]) -> list[Entry]:
        """Read specific positions again (redelivery), skipping any acknowledged meanwhile."""
        wanted = sorted({p for p in positions if not self.is_acknowledged(p)})
        horizon = self.compacted.horizon if self.compacted is not None else None
        if self.compacted is not None and horizon is not None:
            early = self.compacted.entries_at([p for p in wanted if p <= horizon])
            later = await self.ledger.read_positions([p for p in wanted if p > horizon])
            return [e for e in early + later if not self.is_acknowledged(e.position)]
        entries = await self.ledger.read_positions(wanted)
        return [e for e in entries if not self.is_acknowledged(e.position)]

    def rewind(self) -> None:
        """Read again from the first unacknowledged entry (redelivery of everything pending)."""
        self._read_position = self.ledger.next_position(self._mark_delete)
        self._epoch += 1

    async def seek(self, position: Position) -> None:
        """Reset (Pulsar's resetCursor): everything before ``position`` counts as acknowledged,
        nothing from it on; a position past the end means the end. Persisted before returning."""
        target = self.ledger.valid_position(position)
        self.reset_to(Position(target.ledger_id, target.entry_id - 1))
        self._dirty = True
        await self.flush()

    # -- acknowledging --------------------------------------------------------------------------
    async def mark_delete(self, position: Position, properties: dict[str, int] | None = None) -> None:
        """Cumulative acknowledgement of everything up to ``position``; ``properties`` (if given)
        replace the ones stored with the cursor (deduplication keeps its snapshot there)."""
        self._check_open("cumulative ack")
        if properties is not None:
            self.properties = dict(properties)
            self._changed()
        if position <= self._mark_delete:
            return
        last = self.ledger.last_confirmed_entry
        if last is None or position > last:
            log.warning("%r: ignoring cumulative ack of %s, past the last entry %s", self, position, last)
            return
        previous_ledger = self._mark_delete.ledger_id
        self._mark_delete = position
        self._acked.drop_through(position)
        self._collapse()
        self._changed()
        if self.durable and self._mark_delete.ledger_id != previous_ledger:
            self.ledger.cursor_moved_to_ledger()

    async def delete(self, positions: Iterable[Position]) -> None:
        """Individual acknowledgements; they fold into the mark-delete position when contiguous."""
        self._check_open("ack")
        previous_ledger = self._mark_delete.ledger_id
        changed = False
        for position in positions:
            if position <= self._mark_delete:
                continue
            if not self.ledger.has_entry(position):
                log.warning("%r: ignoring ack of %s: no such entry", self, position)
                continue
            changed |= self._acked.add(position)
        if not changed:
            return
        self._collapse()
        self._changed()
        if self.durable and self._mark_delete.ledger_id != previous_ledger:
            self.ledger.cursor_moved_to_ledger()

    def _check_open(self, what: str) -> None:
        # A durable cursor's last write happens at close: a change after it would be applied in
        # memory, answered as done and never persisted. The caller sees the error and tries
        # the topic's next incarnation (a read-only owner's forwarded ack looks the owner up).
        if self.closed and self.durable:
            raise ManagedLedgerClosedError(f"{what} on {self.name} of {self.ledger.name}: cursor closed")

    def _collapse(self) -> None:
        while (end := self._acked.pop_following(self._mark_delete)) is not None:
            self._mark_delete = end
        if self._read_position <= self._mark_delete:
            self._read_position = self.ledger.next_position(self._mark_delete)

    # -- persistence (cursor_storage.py) --------------------------------------------------------
    def _persisted(self) -> CursorStorage:
        assert self.storage is not None, f"{self!r} was given no storage to persist in"
        return self.storage

    def _state(self) -> CursorState:
        limit = self.ledger.config.max_unacked_ranges_to_persist
        if len(self._acked) > limit and not self._warned_truncation:
            self._warned_truncation = True
            log.warning(
                "%r: %d acknowledged ranges, only the first %d are persisted "
                "(max_unacked_ranges_to_persist); later acked entries may be redelivered after a restart",
                self,
                len(self._acked),
                limit,
            )
        return CursorState(self._mark_delete, self._acked.ranges()[:limit], dict(self.properties))

    def _take(self, state: CursorState) -> None:
        self.restore(state.mark_delete, state.ranges)
        self.properties = dict(state.properties)

    def restore(self, mark_delete: Position, ranges: Iterable[tuple[Position, Position]]) -> None:
        """Take a persisted (or forwarded) state: ``mark_delete`` and the acknowledged ranges
        after it, as inclusive (first, last) pairs; read from there."""
        self.reset_to(mark_delete)
        for first, last in sorted(ranges):
            if first > mark_delete:
                self._acked.add_range(first, last)

    async def create(self) -> None:
        """Persist a new cursor; if one of that name appeared meanwhile, take that one over."""
        if not self.durable:
            return
        existing = await self._persisted().create(self._state())
        if existing is not None:
            self._take(existing)

    async def load(self) -> None:
        """Restore the persisted state, taking it over from a previous owner."""
        state = await self._persisted().load()
        if state is None:
            self.reset_to(self.ledger.before_first())
            await self.create()
            return
        self._take(state)

    def _changed(self) -> None:
        self._dirty = True
        if not self.durable or self.closed:
            return
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        while self._dirty and not self.closed:
            await asyncio.sleep(self.ledger.config.cursor_flush_interval_ms / 1000)
            try:
                await self.flush()
            except ManagedLedgerClosedError:
                return
            except ManagedLedgerError as exc:
                log.warning("%r: acknowledgements not persisted yet: %s", self, exc)
                if self.ledger.is_fenced:
                    return

    async def flush(self) -> None:
        """Persist the state now if it changed since the last write."""
        if not self.durable:
            return
        async with self._flush_lock:
            if not self._dirty:
                return
            if self.ledger.is_fenced:
                raise self.ledger.fenced(f"cursor {self.name} not persisted")
            self._dirty = False
            try:
                await self._persisted().save(self._state())
            except BaseException:
                self._dirty = True
                raise

    async def close(self, *, flush: bool = True) -> None:
        """Persist the state one last time (unless the cursor is being deleted) and stop."""
        self.closed = True
        try:
            if flush and self.durable and self.storage is not None:
                async with self._flush_lock:
                    if self.ledger.is_fenced:
                        if self._dirty:
                            raise self.ledger.fenced(f"cursor {self.name} not persisted")
                        return
                    changed, self._dirty = self._dirty, False
                    try:
                        await self.storage.close(self._state(), changed)
                    except BaseException:
                        self._dirty = changed
                        raise
        finally:
            if self._flush_task is not None:
                # Not kept: a cancelled task keeps its CancelledError, whose traceback holds this
                # cursor, and a cursor holding that task would be a cycle.
                task = self._flush_task
                self._flush_task = None
                task.cancel()
