"""Under-replication marks and replication locks in the metadata store (see ``layout.py``).

A mark names the bookies of a ledger whose copies must be made again elsewhere. ``lost`` bookies
are replaced only while they are still gone (one that came back has its entries); ``drain``
bookies (decommissioned, or found missing entries by an entry-level audit) are replaced even
though they run.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field

from magnetar.bookie.layout import REPLICATION_LOCKS, UNDER_REPLICATED, ledger_id_from_name, ledger_name
from magnetar.common.metadata import BadVersionError, MetadataStore, NodeExistsError, NoNodeError


@dataclass(frozen=True)
class Mark:
    lost: frozenset[str] = frozenset()
    drain: frozenset[str] = frozenset()
    marked_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)

    def merged(self, other: Mark) -> Mark:
        return Mark(self.lost | other.lost, self.drain | other.drain, min(self.marked_ms, other.marked_ms))

    def encode(self) -> bytes:
        doc = {"lost": sorted(self.lost), "drain": sorted(self.drain), "marked_ms": self.marked_ms}
        return json.dumps(doc).encode()

    @classmethod
    def decode(cls, data: bytes) -> Mark:
        doc = json.loads(data)
        return cls(frozenset(doc.get("lost", ())), frozenset(doc.get("drain", ())), int(doc["marked_ms"]))


class UnderReplication:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def mark(self, ledger_id: int, mark: Mark) -> None:
        """Add ``mark`` to the ledger's mark (merging with one already there)."""
        path = f"{UNDER_REPLICATED}/{ledger_name(ledger_id)}"
        while True:
            try:
                data, stat = await self._store.get(path)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    await self._store.create(path, mark.encode())
                    return
                continue
            merged = Mark.decode(data).merged(mark)
            with contextlib.suppress(BadVersionError):
                await self._store.put(path, merged.encode(), expected_version=stat.version)
                return

    async def get(self, ledger_id: int) -> tuple[Mark, int] | None:
        """The mark and its version, or None."""
        try:
            data, stat = await self._store.get(f"{UNDER_REPLICATED}/{ledger_name(ledger_id)}")
        except NoNodeError:
            return None
        return Mark.decode(data), stat.version

    async def ledgers(self) -> list[int]:
        try:
            names = await self._store.children(UNDER_REPLICATED)
        except NoNodeError:
            return []
        return sorted(i for i in map(ledger_id_from_name, names) if i is not None)

    async def all(self) -> dict[int, Mark]:
        marks = {}
        for ledger_id in await self.ledgers():
            found = await self.get(ledger_id)
            if found is not None:
                marks[ledger_id] = found[0]
        return marks

    async def release(self, ledger_id: int, version: int) -> bool:
        """Remove the mark if nobody added to it since ``version``; False if it changed."""
        try:
            await self._store.delete(f"{UNDER_REPLICATED}/{ledger_name(ledger_id)}", expected_version=version)
        except NoNodeError:
            return True
        except BadVersionError:
            return False
        return True

    async def lock(self, ledger_id: int) -> bool:
        """Claim the ledger for this worker (an ephemeral node: a dead worker releases it)."""
        try:
            await self._store.create(f"{REPLICATION_LOCKS}/{ledger_name(ledger_id)}", ephemeral=True)
        except NodeExistsError:
            return False
        return True

    async def unlock(self, ledger_id: int) -> None:
        with contextlib.suppress(NoNodeError):
            await self._store.delete(f"{REPLICATION_LOCKS}/{ledger_name(ledger_id)}")
