"""What a ``read_compacted`` cursor reads up to the horizon: the compacted ledger's entries, in
memory, by position. One holder per topic, kept by the cursors that read it, so that a newer
compaction reaches them without a reconnect."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from magnetar.broker.managed_ledger import Entry, Position


@dataclass
class CompactedView:
    #: the last position compaction looked at (None: never compacted)
    horizon: Position | None = None
    #: the id of the ledger holding ``entries`` (None: never compacted)
    ledger_id: int | None = None
    entries: list[Entry] = field(default_factory=list)

    def entries_from(self, position: Position, limit: int) -> list[Entry]:
        """Up to ``limit`` entries at or after ``position`` (all at or before the horizon)."""
        start = bisect.bisect_left([e.position for e in self.entries], position)
        return self.entries[start : start + limit]

    def last_position(self) -> Position | None:
        return self.entries[-1].position if self.entries else None

    def entries_at(self, positions: list[Position]) -> list[Entry]:
        wanted = set(positions)
        return [e for e in self.entries if e.position in wanted]
