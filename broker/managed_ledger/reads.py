"""Reads across a managed ledger's ledgers: runs of entries ledger by ledger, each run read through
the managed ledger's range reader (its cache first, then the writer or a read handle)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from magnetar.broker.managed_ledger.position import Entry, Position
from magnetar.broker.managed_ledger.span import Span

#: (ledger id, first entry, last entry) -> those entries
RangeReader = Callable[[int, int, int], Awaitable[list[Entry]]]


async def read_entries(
    span: Span, read_range: RangeReader, start: Position, max_entries: int, max_bytes: int | None
) -> list[Entry]:
    """Up to ``max_entries`` confirmed entries from ``start`` on; with ``max_bytes``, stops before
    exceeding it (but returns at least one entry)."""
    _check_limits(max_entries, max_bytes)
    entries: list[Entry] = []
    size = 0
    position = span.valid_position(start)
    while len(entries) < max_entries and span.has_entry(position):
        info = span.info(position.ledger_id)
        assert info is not None
        assert span.last_confirmed is not None
        last = min(span.entries_of(info) - 1, position.entry_id + max_entries - len(entries) - 1)
        if span.last_confirmed.ledger_id == position.ledger_id:
            # Not past what add_entry has handed back yet: those entries are in the cache, the
            # ones the writer confirmed a moment later are not (yet).
            last = min(last, span.last_confirmed.entry_id)
        for entry in await read_range(position.ledger_id, position.entry_id, last):
            if max_bytes is not None and entries and size + len(entry.data) > max_bytes:
                return entries
            entries.append(entry)
            size += len(entry.data)
        position = span.next_position(Position(position.ledger_id, last))
    return entries


async def read_entry(span: Span, read_range: RangeReader, position: Position) -> Entry | None:
    if not span.has_entry(position):
        return None
    return (await read_range(position.ledger_id, position.entry_id, position.entry_id))[0]


async def read_positions(span: Span, read_range: RangeReader, positions: list[Position]) -> list[Entry]:
    """The entries at ``positions`` (sorted), those that exist, reading runs together."""
    entries: list[Entry] = []
    run: list[Position] = []
    for position in [p for p in positions if span.has_entry(p)] + [Position(-2, -2)]:
        if run and (position.ledger_id != run[-1].ledger_id or position.entry_id != run[-1].entry_id + 1):
            entries += await read_range(run[0].ledger_id, run[0].entry_id, run[-1].entry_id)
            run = []
        run.append(position)
    return entries


async def find_first(
    span: Span, read_range: RangeReader, predicate: Callable[[Entry], bool]
) -> Position | None:
    """The first entry for which ``predicate`` holds, assuming it then holds for every later one
    (a binary search, as Pulsar's seek by publish time); None if it holds for none."""
    sizes = [(i.ledger_id, span.entries_of(i)) for i in span.ledgers if span.entries_of(i) > 0]
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
        entry = await read_entry(span, read_range, at(middle))
        if entry is not None and predicate(entry):
            high = middle
        else:
            low = middle + 1
    return at(low) if low < total else None


def _check_limits(max_entries: int, max_bytes: int | None) -> None:
    if not isinstance(max_entries, int) or max_entries < 1:
        raise ValueError(f"max_entries must be a positive integer, got {max_entries!r}")
    if max_bytes is not None and max_bytes < 1:
        raise ValueError(f"max_bytes must be positive, got {max_bytes!r}")
