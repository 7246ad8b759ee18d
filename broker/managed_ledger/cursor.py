"""A cursor: where a subscription is in its managed ledger.

State is the mark-delete position (everything at or before it is acknowledged), the positions
individually acknowledged after it, and the read position (the next entry to dispatch). Durable
cursors persist the first two shortly after every change (``cursor_flush_interval_ms``) and at
close; the read position is not persisted: after a restart reading resumes after the
mark-delete position, so unacknowledged entries are redelivered, acknowledged ones are not.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from magnetar.broker.managed_ledger.position import Entry, Position

if TYPE_CHECKING:
    from magnetar.broker.managed_ledger.ledger import ManagedLedger

log = logging.getLogger(__name__)


class ManagedCursor:
    def __init__(self, ledger: ManagedLedger, name: str, *, durable: bool) -> None:
        self.ledger = ledger
        self.name = name
        self.durable = durable
        self.closed = False
        self._mark_delete = Position(-1, -1)
        self._deleted: list[Position] = []  # sorted, all > mark-delete
        self._read_position = Position(-1, -1)
        self._flush_task: asyncio.Task[None] | None = None
        self.properties: dict[str, int] = {}

    # -- state ----------------------------------------------------------------------------------
    @property
    def mark_delete_position(self) -> Position:
        return self._mark_delete

    @property
    def read_position(self) -> Position:
        return self._read_position

    @property
    def individually_deleted(self) -> list[Position]:
        return list(self._deleted)

    def reset_to(self, mark_delete: Position) -> None:
        self._mark_delete = mark_delete
        self._deleted = []
        self._read_position = self.ledger.next_position(mark_delete)

    async def load(self) -> None:
        data = await self.ledger.load_cursor(self.name)
        if data is None:
            self.reset_to(self.ledger.before_first())
            return
        doc = json.loads(data)
        self._mark_delete = Position(*doc["mark_delete"])
        self._deleted = sorted(Position(*p) for p in doc.get("deleted", []))
        self.properties = dict(doc.get("properties", {}))
        self._read_position = self.ledger.next_position(self._mark_delete)

    def is_acknowledged(self, position: Position) -> bool:
        if position <= self._mark_delete:
            return True
        index = bisect.bisect_left(self._deleted, position)
        return index < len(self._deleted) and self._deleted[index] == position

    @property
    def number_of_entries_in_backlog(self) -> int:
        return max(0, self.ledger.count_entries_after(self._mark_delete) - len(self._deleted))

    def has_more_entries(self) -> bool:
        return self.ledger.has_entry(self.ledger.valid_position(self._read_position))

    # -- reading --------------------------------------------------------------------------------
    async def read_entries(self, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` unacknowledged entries from the read position on."""
        found: list[Entry] = []
        while len(found) < max_entries:
            batch = await self.ledger.read_entries(self._read_position, max_entries - len(found))
            if not batch:
                break
            self._read_position = self.ledger.next_position(batch[-1].position)
            found += [e for e in batch if not self.is_acknowledged(e.position)]
        return found

    async def replay(self, positions: Iterable[Position]) -> list[Entry]:
        """Read specific positions again (redelivery), skipping any acknowledged meanwhile."""
        entries = []
        for position in sorted(set(positions)):
            if self.is_acknowledged(position):
                continue
            entry = await self.ledger.read_entry(position)
            if entry is not None:
                entries.append(entry)
        return entries

    def rewind(self) -> None:
        """Read again from the first unacknowledged entry (redelivery of everything pending)."""
        self._read_position = self.ledger.next_position(self._mark_delete)

    async def seek(self, position: Position) -> None:
        """Reset: everything before ``position`` counts as acknowledged, nothing after it."""
        self.reset_to(Position(position.ledger_id, position.entry_id - 1))
        self._schedule_flush()

    # -- acknowledging --------------------------------------------------------------------------
    async def mark_delete(self, position: Position, properties: dict[str, int] | None = None) -> None:
        """Cumulative acknowledgement of everything up to ``position``."""
        if properties:
            self.properties.update(properties)
        if position <= self._mark_delete:
            return
        self._mark_delete = position
        self._deleted = self._deleted[bisect.bisect_right(self._deleted, position) :]
        self._collapse()
        self._changed()

    async def delete(self, positions: Iterable[Position]) -> None:
        """Individual acknowledgements."""
        for position in positions:
            if position <= self._mark_delete:
                continue
            index = bisect.bisect_left(self._deleted, position)
            if index == len(self._deleted) or self._deleted[index] != position:
                self._deleted.insert(index, position)
        self._collapse()
        self._changed()

    def _collapse(self) -> None:
        """Fold individual acks that continue the mark-delete position into it."""
        while self._deleted and self._deleted[0] == self.ledger.next_position(self._mark_delete):
            self._mark_delete = self._deleted.pop(0)
        if self._read_position <= self._mark_delete:
            self._read_position = self.ledger.next_position(self._mark_delete)

    def _changed(self) -> None:
        self._schedule_flush()
        if self.durable:
            asyncio.get_running_loop().create_task(self._trim())

    async def _trim(self) -> None:
        with contextlib.suppress(Exception):
            await self.ledger.trim()

    # -- persistence ----------------------------------------------------------------------------
    def _schedule_flush(self) -> None:
        if not self.durable or self.closed or (self._flush_task is not None and not self._flush_task.done()):
            return
        self._flush_task = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.ledger.config.cursor_flush_interval_ms / 1000)
        await self.flush()

    async def flush(self) -> None:
        if not self.durable:
            return
        doc = {
            "mark_delete": [self._mark_delete.ledger_id, self._mark_delete.entry_id],
            "deleted": [[p.ledger_id, p.entry_id] for p in self._deleted],
            "properties": self.properties,
        }
        await self.ledger.save_cursor(self.name, json.dumps(doc).encode())
