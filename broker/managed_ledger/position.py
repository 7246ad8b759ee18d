"""Positions in a managed ledger: (ledger id, entry id), ordered as the log is."""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class Position:
    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


@dataclass(frozen=True, slots=True)
class Entry:
    position: Position
    data: bytes  # exactly the bytes the producer sent


class InitialPosition(enum.StrEnum):
    LATEST = "latest"
    EARLIEST = "earliest"
