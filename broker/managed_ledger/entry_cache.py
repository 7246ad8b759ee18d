"""Recently added entries kept in memory (Pulsar's EntryCache), so consumers that keep up are
served without a read from the bookies; the oldest go first once ``cache_size_mb`` is reached."""

from __future__ import annotations

from collections import OrderedDict

from magnetar.broker.managed_ledger.position import Position


class EntryCache:
    def __init__(self, limit_bytes: int) -> None:
        self._limit = limit_bytes
        self._entries: OrderedDict[Position, bytes] = OrderedDict()
        self._bytes = 0

    def get(self, position: Position) -> bytes | None:
        return self._entries.get(position)

    def get_range(self, ledger_id: int, first: int, last: int) -> list[bytes | None]:
        return [self._entries.get(Position(ledger_id, e)) for e in range(first, last + 1)]

    def put(self, position: Position, data: bytes) -> None:
        if self._limit <= 0:
            return
        self._entries[position] = data
        self._bytes += len(data)
        while self._bytes > self._limit and self._entries:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= len(evicted)

    def forget_ledger(self, ledger_id: int) -> None:
        for position in [p for p in self._entries if p.ledger_id == ledger_id]:
            self._bytes -= len(self._entries.pop(position))
