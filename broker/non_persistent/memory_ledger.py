"""A topic ledger in memory, for a non-persistent topic: nothing reaches a bookie or the metadata
store, so it is given neither.

It is one ledger whose id is the time it was opened in milliseconds, so the message ids of a
topic loaded again (after an unload or a restart) still grow, and a client never takes a new
message for one it has seen. Entries are kept only until every subscription is past them
(``forget_through``); a position before the first one kept is no entry any more. Cursors are the
non-durable kind only; the topic epoch and other properties live as long as the topic is loaded,
as in Pulsar.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from magnetar.broker.managed_ledger import (
    Entry,
    InitialPosition,
    LedgerInfo,
    ManagedCursor,
    ManagedLedgerClosedError,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    Position,
    reads,
)
from magnetar.broker.managed_ledger.meta_store import validate_name
from magnetar.broker.managed_ledger.new_entries import NewEntries
from magnetar.broker.managed_ledger.span import Span
from magnetar.broker.managed_ledger.topic_ledger import AddCallback


class NotStoredError(ManagedLedgerError):
    """What only a stored topic can do (a durable cursor, termination) was asked of a
    non-persistent one."""


class MemoryLedger:
    def __init__(self, name: str, config: ManagedLedgerConfig) -> None:
        self.name = validate_name(name)
        self.config = config
        self._ledger_id = int(time.time() * 1000)
        self._ledgers: list[LedgerInfo] = []
        #: the entries kept, oldest first, and the entry id of the first of them
        self._kept: deque[bytes] = deque()
        self._first_kept = 0
        self._kept_bytes = 0
        self._last_confirmed: Position | None = None
        self._new_entries = NewEntries()
        self._properties: dict[str, str] = {}
        self._closed = False
        #: always empty: a non-persistent topic has no durable cursor
        self.cursors: dict[str, ManagedCursor] = {}
        self.entries_added = 0
        self.bytes_added = 0

    async def open(self) -> None:
        self._ledgers = [LedgerInfo(self._ledger_id)]

    # -- writing --------------------------------------------------------------------------------
    async def add_entry(self, data: bytes) -> Position:
        return self._append(data)

    def _append(self, data: bytes) -> Position:
        if self._closed:
            raise ManagedLedgerClosedError(f"managed ledger {self.name} is closed")
        payload = bytes(data)
        position = Position(self._ledger_id, self._first_kept + len(self._kept))
        self._kept.append(payload)
        self._kept_bytes += len(payload)
        self._last_confirmed = position
        self.entries_added += 1
        self.bytes_added += len(payload)
        self._new_entries.notify()
        return position

    def add_entry_then(self, data: bytes, done: AddCallback) -> None:
        """As ``add_entry``, answered in the next loop turn (stored at once: nothing to wait for)."""
        loop = asyncio.get_running_loop()
        try:
            position = self._append(data)
        except ManagedLedgerClosedError as exc:
            loop.call_soon(done, None, exc)
            return
        loop.call_soon(done, position, None)

    def forget_through(self, position: Position) -> None:
        """Drop the entries up to ``position``: no subscription will read them again."""
        while self._kept and self._first_kept <= position.entry_id:
            self._kept_bytes -= len(self._kept.popleft())
            self._first_kept += 1

    # -- state ----------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def is_fenced(self) -> bool:
        return False  # nothing is owned through the store: no other broker can take it over

    @property
    def is_terminated(self) -> bool:
        return False

    def fenced(self, why: str) -> ManagedLedgerFencedError:
        """Never asked: only a durable cursor's failed write asks, and there is none here."""
        return ManagedLedgerFencedError(f"{self.name} is non-persistent: nothing of it is fenced ({why})")

    @property
    def last_confirmed_entry(self) -> Position | None:
        return self._last_confirmed

    @property
    def total_size(self) -> int:
        """Bytes held in memory now (nothing is stored)."""
        return self._kept_bytes

    @property
    def number_of_entries(self) -> int:
        return len(self._kept)

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return list(self._ledgers)

    # -- positions ------------------------------------------------------------------------------
    def _span(self) -> Span:
        return Span(self._ledgers, lambda _: self._first_kept + len(self._kept), self._last_confirmed)

    def first_position(self) -> Position:
        return Position(self._ledger_id, self._first_kept)

    def before_first(self) -> Position:
        return Position(self._ledger_id, self._first_kept - 1)

    def valid_position(self, position: Position) -> Position:
        return self._span().valid_position(max(position, self.first_position()))

    def next_position(self, position: Position) -> Position:
        return self._span().next_position(position)

    def previous_position(self, position: Position) -> Position | None:
        return self._span().previous_position(position)

    def has_entry(self, position: Position) -> bool:
        return position.entry_id >= self._first_kept and self._span().has_entry(position)

    def count_entries_after(self, position: Position) -> int:
        return self._span().count_entries_after(position)

    def count_entries_between(self, first: Position, last: Position) -> int:
        return self._span().count_entries_between(first, last)

    # -- reading --------------------------------------------------------------------------------
    async def read_entries(
        self, start: Position, max_entries: int, max_bytes: int | None = None
    ) -> list[Entry]:
        return await reads.read_entries(self._span(), self._read_range, start, max_entries, max_bytes)

    async def read_entry(self, position: Position) -> Entry | None:
        if not self.has_entry(position):
            return None
        return await reads.read_entry(self._span(), self._read_range, position)

    async def read_positions(self, positions: list[Position]) -> list[Entry]:
        kept = [p for p in positions if self.has_entry(p)]
        return await reads.read_positions(self._span(), self._read_range, kept)

    async def find_first_position(self, predicate: Callable[[Entry], bool]) -> Position | None:
        return await reads.find_first(self._span(), self._read_range, predicate)

    async def _read_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        start = max(first, self._first_kept)
        return [
            Entry(Position(ledger_id, entry_id), self._kept[entry_id - self._first_kept])
            for entry_id in range(start, min(last, self._first_kept + len(self._kept) - 1) + 1)
        ]

    def wait_for_new_entries(self) -> asyncio.Future[None]:
        return self._new_entries.wait(closed=self._closed)

    # -- cursors --------------------------------------------------------------------------------
    async def open_cursor(
        self, name: str, initial_position: InitialPosition = InitialPosition.LATEST
    ) -> ManagedCursor:
        raise NotStoredError(f"{self.name} is non-persistent: it has no durable cursor ({name})")

    def new_non_durable_cursor(
        self, start: Position | InitialPosition, *, inclusive: bool = True
    ) -> ManagedCursor:
        return ManagedCursor.reader(self, start, inclusive=inclusive)

    async def delete_cursor(self, name: str) -> None:
        self.cursors.pop(name, None)

    def cursor_moved_to_ledger(self) -> None:
        return None  # nothing is retained past what the subscriptions need (forget_through)

    # -- properties and closing -----------------------------------------------------------------
    @property
    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    async def set_property(self, key: str, value: str) -> None:
        if self._closed:
            raise ManagedLedgerClosedError(f"managed ledger {self.name} is closed")
        self._properties[key] = value

    async def terminate(self) -> Position | None:
        raise NotStoredError(f"{self.name} is non-persistent: it cannot be terminated")

    async def close(self) -> None:
        self._closed = True
        self._kept.clear()
        self._kept_bytes = 0
        self._new_entries.cancel_all()

    async def delete(self) -> None:
        await self.close()
