"""Positions across a managed ledger's ledgers: where reading starts, what follows an entry, how
many entries lie between two positions.

A position is (ledger id, entry id); the ledgers follow each other in id order, and how many
entries each holds is the managed ledger's to say (the ledger being written has what its writer
confirmed; a read-only owner's tail what it has seen).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from magnetar.broker.managed_ledger.meta_store import LedgerInfo
from magnetar.broker.managed_ledger.position import Position


@dataclass(frozen=True)
class Span:
    ledgers: Sequence[LedgerInfo]
    entries_of: Callable[[LedgerInfo], int]
    #: the last entry confirmed to the writer (or seen by a reader); None before any
    last_confirmed: Position | None

    def info(self, ledger_id: int) -> LedgerInfo | None:
        return next((i for i in self.ledgers if i.ledger_id == ledger_id), None)

    def first_position(self) -> Position:
        """Where reading from the earliest starts (an entry, or the next one to be written)."""
        for info in self.ledgers:
            if self.entries_of(info) > 0:
                return Position(info.ledger_id, 0)
        return Position(self.ledgers[-1].ledger_id, 0) if self.ledgers else Position(-1, 0)

    def before_first(self) -> Position:
        """The mark-delete position of a cursor that has read nothing."""
        first = self.first_position()
        return Position(first.ledger_id, first.entry_id - 1)

    def valid_position(self, position: Position) -> Position:
        """The first position at or after ``position`` where an entry is, or will be written."""
        for index, info in enumerate(self.ledgers):
            if info.ledger_id < position.ledger_id:
                continue
            entries = self.entries_of(info)
            start = max(position.entry_id, 0) if info.ledger_id == position.ledger_id else 0
            if start < entries:
                return Position(info.ledger_id, start)
            if index == len(self.ledgers) - 1:
                return Position(info.ledger_id, entries)
        if not self.ledgers:
            return position
        last = self.ledgers[-1]
        return Position(last.ledger_id, self.entries_of(last))

    def next_position(self, position: Position) -> Position:
        return self.valid_position(Position(position.ledger_id, position.entry_id + 1))

    def previous_position(self, position: Position) -> Position | None:
        """The entry before ``position`` (across ledgers), None before the first."""
        if position.entry_id > 0:
            return Position(position.ledger_id, position.entry_id - 1)
        for info in reversed(self.ledgers):
            entries = self.entries_of(info)
            if info.ledger_id < position.ledger_id and entries > 0:
                return Position(info.ledger_id, entries - 1)
        return None

    def has_entry(self, position: Position) -> bool:
        if self.last_confirmed is None or position > self.last_confirmed or position.entry_id < 0:
            return False
        info = self.info(position.ledger_id)
        return info is not None and position.entry_id < self.entries_of(info)

    def count_entries_after(self, position: Position) -> int:
        """Confirmed entries strictly after ``position``."""
        count = 0
        for info in self.ledgers:
            entries = self.entries_of(info)
            if info.ledger_id > position.ledger_id:
                count += entries
            elif info.ledger_id == position.ledger_id:
                count += max(0, entries - position.entry_id - 1)
        return count

    def count_entries_between(self, first: Position, last: Position) -> int:
        """Entries from ``first`` to ``last``, both included."""
        if first.ledger_id == last.ledger_id:  # the common case, without walking the ledgers
            info = self.info(first.ledger_id)
            if info is None:
                return 0
            end = min(last.entry_id, self.entries_of(info) - 1)
            return max(0, end - max(first.entry_id, 0) + 1)
        before = Position(first.ledger_id, first.entry_id - 1)
        return max(0, self.count_entries_after(before) - self.count_entries_after(last))
