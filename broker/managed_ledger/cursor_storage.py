"""Where a durable cursor's state is persisted (architecture §4, "Managed ledgers and cursors").

A cursor keeps its state in memory and hands a ``CursorState`` to its ``CursorStorage`` to make
it durable: the owner's durable cursors use a cursor ledger on the bookies
(``cursor_ledger.LedgerCursorStorage``); a reader's cursor has no storage at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from magnetar.broker.managed_ledger.errors import ManagedLedgerError
from magnetar.broker.managed_ledger.position import Position


@dataclass
class CursorState:
    """What is persisted of a cursor (Pulsar's PositionInfo): the mark-delete position, the
    ranges individually acknowledged after it (inclusive first, last pairs) and its properties."""

    mark_delete: Position
    ranges: list[tuple[Position, Position]] = field(default_factory=list)
    properties: dict[str, int] = field(default_factory=dict)

    def to_doc(self) -> dict[str, Any]:
        return {
            "mark_delete": [self.mark_delete.ledger_id, self.mark_delete.entry_id],
            "ranges": [[a.ledger_id, a.entry_id, b.ledger_id, b.entry_id] for a, b in self.ranges],
            "properties": self.properties,
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any], what: str) -> CursorState:
        """``what`` names the cursor in the error when ``doc`` is not a cursor state."""
        try:
            mark_delete = Position(*doc["mark_delete"])
            ranges = [(Position(a, b), Position(c, d)) for a, b, c, d in doc.get("ranges", [])]
            ranges += [(Position(*p), Position(*p)) for p in doc.get("deleted", [])]  # oldest format
            properties = {str(k): int(v) for k, v in doc.get("properties", {}).items()}
        except (ValueError, TypeError, KeyError) as exc:
            raise ManagedLedgerError(f"{what} is unreadable: {exc}") from exc
        return cls(mark_delete, ranges, properties)

    def encode(self) -> bytes:
        """A cursor-ledger entry: the state as compact JSON."""
        return json.dumps(self.to_doc(), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes, what: str) -> CursorState:
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise ManagedLedgerError(f"{what} is unreadable: {exc}") from exc
        if not isinstance(doc, dict):
            raise ManagedLedgerError(f"{what} is unreadable: not an object")
        return cls.from_doc(doc, what)


class CursorStorage(Protocol):
    """Makes a durable cursor's state survive its broker. Every method raises
    ManagedLedgerFencedError once another broker took the cursor over, ManagedLedgerError when
    the state could not be persisted (yet)."""

    @property
    def ledger_id(self) -> int:
        """The ledger the state is persisted in (-1: none yet), as internal stats report it."""
        ...

    async def create(self, state: CursorState) -> CursorState | None:
        """Persist a new cursor at ``state``; the state of one of that name that appeared
        meanwhile (taken over) instead, if one did."""
        ...

    async def load(self) -> CursorState | None:
        """The persisted state, taken over from a previous owner (None: there is no cursor)."""
        ...

    async def save(self, state: CursorState) -> None:
        """Persist ``state`` (an acknowledgement, a seek)."""
        ...

    async def close(self, state: CursorState, changed: bool) -> None:
        """The last write of this owner: ``state``, ``changed`` since the last ``save`` or not."""
        ...

    async def delete(self) -> None:
        """Forget the cursor for good."""
        ...
