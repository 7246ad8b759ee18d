"""A managed ledger in memory, for a non-persistent topic: nothing reaches a bookie or the
metadata store.

It is one ledger whose id is the time it was opened in milliseconds, so the message ids of a
topic loaded again (after an unload or a restart) still grow, and a client never takes a new
message for one it has seen. Entries are kept only until every subscription is past them
(``forget_through``); a position before the first one kept is no entry any more. Cursors are the
non-durable kind only; the topic epoch and other properties live as long as the topic is loaded,
as in Pulsar.
"""

from __future__ import annotations

import time
from collections import deque

from magnetar.bookie.client import LedgerClient
from magnetar.broker.managed_ledger import (
    Entry,
    InitialPosition,
    LedgerInfo,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerError,
    Position,
)
from magnetar.common.metadata import MetadataStore


class NotStoredError(ManagedLedgerError):
    """What only a stored topic can do (a durable cursor, termination) was asked of a
    non-persistent one."""


class MemoryLedger(ManagedLedger):
    def __init__(
        self, name: str, store: MetadataStore, client: LedgerClient, config: ManagedLedgerConfig
    ) -> None:
        super().__init__(name, store, client, config)
        self._ledger_id = int(time.time() * 1000)
        #: the entries kept, oldest first, and the entry id of the first of them
        self._kept: deque[bytes] = deque()
        self._first_kept = 0
        self._kept_bytes = 0

    async def open(self) -> None:
        self._ledgers = [LedgerInfo(self._ledger_id)]

    # -- writing --------------------------------------------------------------------------------
    async def add_entry(self, data: bytes) -> Position:
        self._check_writable()
        payload = bytes(data)
        position = Position(self._ledger_id, self._first_kept + len(self._kept))
        self._kept.append(payload)
        self._kept_bytes += len(payload)
        self._last_confirmed = position
        self.entries_added += 1
        self.bytes_added += len(payload)
        self._new_entries.notify()
        return position

    def forget_through(self, position: Position) -> None:
        """Drop the entries up to ``position``: no subscription will read them again."""
        while self._kept and self._first_kept <= position.entry_id:
            self._kept_bytes -= len(self._kept.popleft())
            self._first_kept += 1

    # -- positions ------------------------------------------------------------------------------
    def _entries_of(self, info: LedgerInfo) -> int:
        return self._first_kept + len(self._kept)

    @property
    def total_size(self) -> int:
        """Bytes held in memory now (nothing is stored)."""
        return self._kept_bytes

    @property
    def number_of_entries(self) -> int:
        return len(self._kept)

    def first_position(self) -> Position:
        return Position(self._ledger_id, self._first_kept)

    def before_first(self) -> Position:
        return Position(self._ledger_id, self._first_kept - 1)

    def valid_position(self, position: Position) -> Position:
        return super().valid_position(max(position, self.first_position()))

    def has_entry(self, position: Position) -> bool:
        return position.entry_id >= self._first_kept and super().has_entry(position)

    async def read_entry(self, position: Position) -> Entry | None:
        return await super().read_entry(position) if self.has_entry(position) else None

    async def read_positions(self, positions: list[Position]) -> list[Entry]:
        return await super().read_positions([p for p in positions if self.has_entry(p)])

    async def _read_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        start = max(first, self._first_kept)
        return [
            Entry(Position(ledger_id, entry_id), self._kept[entry_id - self._first_kept])
            for entry_id in range(start, min(last, self._first_kept + len(self._kept) - 1) + 1)
        ]

    # -- cursors --------------------------------------------------------------------------------
    async def open_cursor(
        self, name: str, initial_position: InitialPosition = InitialPosition.LATEST
    ) -> ManagedCursor:
        raise NotStoredError(f"{self.name} is non-persistent: it has no durable cursor ({name})")

    async def delete_cursor(self, name: str) -> None:
        self.cursors.pop(name, None)

    def cursor_moved_to_ledger(self) -> None:
        return None

    async def trim(self) -> list[int]:
        return []

    # -- properties and closing -----------------------------------------------------------------
    async def set_property(self, key: str, value: str) -> None:
        self._check_writable()
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
