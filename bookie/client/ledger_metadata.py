"""Ledger metadata as stored in the metadata store (architecture §4).

Ensembles are keyed by the first entry they hold: ``[(0, [b1, b2, b3]), (1042, [b1, b4, b3])]``
means entries 0..1041 were written to the first ensemble and 1042.. to the second. Entry ``e`` of
an ensemble of E bookies goes to the Qw bookies at positions ``e, e+1, …, e+Qw-1`` (mod E):
BookKeeper's round-robin striping, which spreads a ledger's load over all E bookies.

The password the ledger was created with is kept here too, as BookKeeper keeps it, so that
recovery and re-replication can derive the master key the bookies check: whoever may read the
metadata store may act on the ledger; a caller of a bookie's port alone may not.
"""

from __future__ import annotations

import base64
import bisect
import enum
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

from magnetar.bookie.digest import master_key

FORMAT_VERSION = 1


class LedgerState(enum.StrEnum):
    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"


@dataclass(frozen=True)
class LedgerMetadata:
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    ensembles: tuple[tuple[int, tuple[str, ...]], ...]
    state: LedgerState = LedgerState.OPEN
    last_entry_id: int = -1
    length: int = 0
    digest_type: str = "CRC32C"
    ctime_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    custom: dict[str, str] = field(default_factory=dict)
    password: bytes = field(default=b"", repr=False)  # kept out of logs

    def __post_init__(self) -> None:
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum >= 1:
            raise ValueError(
                f"need ensemble size >= write quorum >= ack quorum >= 1, got "
                f"E={self.ensemble_size} Qw={self.write_quorum} Qa={self.ack_quorum}"
            )
        for _, bookies in self.ensembles:
            if len(bookies) != self.ensemble_size or len(set(bookies)) != self.ensemble_size:
                raise ValueError(f"ensemble {list(bookies)} must hold {self.ensemble_size} distinct bookies")

    @property
    def master_key(self) -> bytes:
        return master_key(self.password)

    def ensemble_for(self, entry_id: int) -> tuple[str, ...]:
        last_first, last = self.ensembles[-1]
        if entry_id >= last_first:  # a writer's entries: the current ensemble, asked per entry
            return last
        firsts = [first for first, _ in self.ensembles]
        index = bisect.bisect_right(firsts, entry_id) - 1
        return self.ensembles[max(index, 0)][1]

    @property
    def last_ensemble(self) -> tuple[str, ...]:
        return self.ensembles[-1][1]

    def write_positions(self, entry_id: int) -> list[int]:
        """Positions in the ensemble of the Qw bookies that store ``entry_id``."""
        return [(entry_id + i) % self.ensemble_size for i in range(self.write_quorum)]

    def write_set(self, entry_id: int) -> list[str]:
        ensemble = self.ensemble_for(entry_id)
        return [ensemble[p] for p in self.write_positions(entry_id)]

    def bookies(self) -> set[str]:
        return {b for _, ensemble in self.ensembles for b in ensemble}

    def with_ensemble(self, first_entry: int, ensemble: tuple[str, ...]) -> LedgerMetadata:
        # An ensemble that starts where the last one starts replaces it: no entry was written to it.
        kept = tuple(e for e in self.ensembles if e[0] < first_entry)
        return replace(self, ensembles=(*kept, (first_entry, ensemble)))

    def with_fragment_ensemble(self, first_entry: int, ensemble: tuple[str, ...]) -> LedgerMetadata:
        """Replace the ensemble of the fragment starting at ``first_entry`` and no other (what
        re-replication does once the fragment's entries are on the new bookies)."""
        if first_entry not in {first for first, _ in self.ensembles}:
            raise ValueError(f"no fragment starts at entry {first_entry}")
        return replace(
            self, ensembles=tuple((f, ensemble if f == first_entry else e) for f, e in self.ensembles)
        )

    def fragments(self, last_entry: int) -> list[tuple[int, int, tuple[str, ...]]]:
        """(first, last, ensemble) of every fragment up to ``last_entry`` (last < first: empty)."""
        bounds = [first for first, _ in self.ensembles[1:]] + [last_entry + 1]
        return [
            (first, min(end, last_entry + 1) - 1, e)
            for (first, e), end in zip(self.ensembles, bounds, strict=True)
        ]

    def closed_at(self, last_entry_id: int, length: int) -> LedgerMetadata:
        return replace(self, state=LedgerState.CLOSED, last_entry_id=last_entry_id, length=length)

    def encode(self) -> bytes:
        doc: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "ensemble_size": self.ensemble_size,
            "write_quorum": self.write_quorum,
            "ack_quorum": self.ack_quorum,
            "state": self.state.value,
            "last_entry_id": self.last_entry_id,
            "length": self.length,
            "digest_type": self.digest_type,
            "ctime_ms": self.ctime_ms,
            "ensembles": [[first, list(bookies)] for first, bookies in self.ensembles],
            "custom": self.custom,
            "password": base64.b64encode(self.password).decode(),
        }
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, *, ledger_id: int | None = None) -> LedgerMetadata:
        where = f"ledger {ledger_id}" if ledger_id is not None else "ledger"
        try:
            doc = json.loads(data)
            if doc.get("format") != FORMAT_VERSION:
                raise ValueError(f"unknown metadata format {doc.get('format')!r}")
            return cls(
                ensemble_size=int(doc["ensemble_size"]),
                write_quorum=int(doc["write_quorum"]),
                ack_quorum=int(doc["ack_quorum"]),
                state=LedgerState(doc["state"]),
                last_entry_id=int(doc["last_entry_id"]),
                length=int(doc["length"]),
                digest_type=str(doc["digest_type"]),
                ctime_ms=int(doc["ctime_ms"]),
                ensembles=tuple((int(first), tuple(bookies)) for first, bookies in doc["ensembles"]),
                custom=dict(doc.get("custom", {})),
                password=base64.b64decode(doc.get("password", ""), validate=True),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{where}: unreadable metadata: {exc}") from exc
