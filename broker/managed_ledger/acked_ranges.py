"""Positions acknowledged individually after a cursor's mark-delete position, kept as ranges.

Pulsar's ``individuallyDeletedMessages``: a Shared subscription acknowledges out of order, so a
cursor holds the acknowledged positions past its mark-delete position. Storing them as inclusive
``(first, last)`` ranges keeps memory (and the persisted cursor) proportional to the number of
holes, not to the number of acknowledgements. Two positions are adjacent when no entry lies
between them, which only the managed ledger knows (ledgers end and empty ones vanish), so the
ledger supplies ``successor``: the first position after a given one where an entry is or will be.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

from magnetar.broker.managed_ledger.position import Position

Successor = Callable[[Position], Position]


class AckedRanges:
    def __init__(self, successor: Successor) -> None:
        self._successor = successor
        self._firsts: list[Position] = []  # sorted; ranges never overlap nor touch
        self._lasts: list[Position] = []

    def __len__(self) -> int:
        return len(self._firsts)

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        return iter(zip(self._firsts, self._lasts, strict=True))

    def ranges(self) -> list[tuple[Position, Position]]:
        return list(self)

    def clear(self) -> None:
        self._firsts.clear()
        self._lasts.clear()

    def _containing(self, position: Position) -> int | None:
        index = bisect.bisect_right(self._firsts, position) - 1
        if index >= 0 and position <= self._lasts[index]:
            return index
        return None

    def __contains__(self, position: object) -> bool:
        return isinstance(position, Position) and self._containing(position) is not None

    def add(self, position: Position) -> bool:
        """Record ``position``; False when it was already recorded."""
        index = bisect.bisect_right(self._firsts, position)  # ranges before ``index`` start at/before it
        if index > 0 and position <= self._lasts[index - 1]:
            return False
        joins_previous = index > 0 and self._successor(self._lasts[index - 1]) == position
        joins_next = index < len(self._firsts) and self._successor(position) == self._firsts[index]
        if joins_previous and joins_next:
            self._lasts[index - 1] = self._lasts[index]
            del self._firsts[index], self._lasts[index]
        elif joins_previous:
            self._lasts[index - 1] = position
        elif joins_next:
            self._firsts[index] = position
        else:
            self._firsts.insert(index, position)
            self._lasts.insert(index, position)
        return True

    def add_range(self, first: Position, last: Position) -> None:
        """Record a whole range (as loaded from a persisted cursor)."""
        index = bisect.bisect_left(self._firsts, first)
        self._firsts.insert(index, first)
        self._lasts.insert(index, last)

    def drop_through(self, position: Position) -> None:
        """Forget everything at or before ``position`` (the mark-delete position moved there)."""
        index = bisect.bisect_right(self._lasts, position)
        del self._firsts[:index], self._lasts[:index]
        if self._firsts and self._firsts[0] <= position:
            self._firsts[0] = self._successor(position)

    def pop_following(self, position: Position) -> Position | None:
        """If the first range starts right after ``position``, remove it and return its end."""
        if self._firsts and self._firsts[0] == self._successor(position):
            self._firsts.pop(0)
            return self._lasts.pop(0)
        return None

    def skip(self, position: Position) -> Position:
        """``position``, or the first position after the range that contains it."""
        index = self._containing(position)
        return position if index is None else self._successor(self._lasts[index])

    def count(self, entries_between: Callable[[Position, Position], int]) -> int:
        """How many entries the ranges cover (``entries_between`` counts one inclusive range)."""
        return sum(entries_between(first, last) for first, last in self)

    def encode(self, limit: int) -> list[list[int]]:
        """The first ``limit`` ranges as ``[first_ledger, first_entry, last_ledger, last_entry]``."""
        return [[f.ledger_id, f.entry_id, s.ledger_id, s.entry_id] for f, s in list(self)[:limit]]
