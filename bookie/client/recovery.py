"""Open with recovery: fence the ledger, find where it really ends, close it there.

As in BookKeeper: mark the ledger IN_RECOVERY, fence it on the bookies of its last ensemble (so the
old writer's next add fails), start from the highest LAC they report that some bookie's entries
back (a LAC from a bookie that stores no entry that far is not believed: starting lower only
costs reads, starting past the real end would lose acknowledged entries), then read forward entry
by entry. An entry found on any bookie of its write set is written again (recovery adds, allowed on
fenced ledgers) until it has Qa copies; the first entry that is missing from enough bookies that it
can never have reached Qa is the end. The ledger is then closed at the last recovered entry, which
is at or past the last entry the old writer had acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from magnetar.bookie.client.bookie_connection import BookieConnectionPool, CorruptEntryError
from magnetar.bookie.client.ensemble import EnsemblePlacement
from magnetar.bookie.client.errors import (
    DigestMismatchError,
    LedgerRecoveryError,
    NoSuchEntryError,
    NoSuchLedgerError,
    UnauthorizedAccessError,
)
from magnetar.bookie.client.ledger_handle import LedgerHandle
from magnetar.bookie.client.ledger_manager import LedgerManager, VersionedMetadata
from magnetar.bookie.client.ledger_metadata import LedgerMetadata, LedgerState
from magnetar.bookie.client.read_handle import EntryReader
from magnetar.common.metadata.store import BadVersionError

log = logging.getLogger(__name__)

#: length recorded for a recovered ledger: bytes written before the recovery point are unknown
UNKNOWN_LENGTH = -1


class LedgerRecovery:
    def __init__(
        self,
        ledger_id: int,
        *,
        manager: LedgerManager,
        pool: BookieConnectionPool,
        placement: EnsemblePlacement,
    ) -> None:
        self.ledger_id = ledger_id
        self._manager = manager
        self._pool = pool
        self._placement = placement
        self._key = b""  # the ledger's master key, known once its metadata is read
        self._reader = EntryReader(ledger_id, pool)

    async def run(self) -> LedgerMetadata:
        versioned = await self._mark_in_recovery()
        if versioned.metadata.state == LedgerState.CLOSED:
            return versioned.metadata
        metadata = versioned.metadata
        self._key = metadata.master_key
        self._reader = EntryReader(self.ledger_id, self._pool, master_key=self._key)
        start = await self._fence(metadata)
        writer = LedgerHandle(
            self.ledger_id,
            versioned,
            manager=self._manager,
            pool=self._pool,
            placement=self._placement,
            last_add_confirmed=start,
            length=UNKNOWN_LENGTH,
            recovery=True,
        )
        await writer.start()
        entry_id = start + 1
        while (payload := await self._read_for_recovery(writer.metadata, entry_id)) is not None:
            await writer.add_entry(payload)
            entry_id += 1
        closed = await writer.close()
        log.info("ledger %d recovered and closed at entry %d", self.ledger_id, closed.last_entry_id)
        return closed

    async def _mark_in_recovery(self) -> VersionedMetadata:
        while True:
            versioned = await self._manager.read(self.ledger_id)
            if versioned.metadata.state != LedgerState.OPEN:
                return versioned  # already closed, or another client is recovering it too
            try:
                return await self._manager.write(
                    self.ledger_id,
                    _with_state(versioned.metadata, LedgerState.IN_RECOVERY),
                    versioned.version,
                )
            except BadVersionError:
                continue  # the writer changed its ensemble meanwhile: read again

    async def _fence(self, metadata: LedgerMetadata) -> int:
        """Fence the last ensemble; return the entry to start reading after."""
        ensemble = metadata.last_ensemble
        answers = await asyncio.gather(*(self._fence_one(b) for b in ensemble), return_exceptions=True)
        fenced = {pos: a for pos, a in enumerate(answers) if isinstance(a, tuple)}
        failures = {ensemble[pos]: str(a) for pos, a in enumerate(answers) if isinstance(a, BaseException)}
        if unauthorized := [a for a in answers if isinstance(a, UnauthorizedAccessError)]:
            raise unauthorized[0]
        if not _covers_every_ack_quorum(metadata, set(fenced)):
            raise LedgerRecoveryError(
                self.ledger_id,
                f"too few bookies of {list(ensemble)} answered the fencing request to be sure where "
                f"the ledger ends ({failures})",
            )
        # Entries before the last ensemble's first entry were confirmed before the ensemble changed.
        floor = metadata.ensembles[-1][0] - 1
        return max(floor, *(self._backed(metadata, lac, fenced) for lac, _ in fenced.values()))

    def _backed(self, metadata: LedgerMetadata, lac: int, fenced: dict[int, tuple[int, int]]) -> int:
        """``lac`` if a bookie that answered and stores entry ``lac`` has entries that far; else -1."""
        if lac < 0 or any(fenced[pos][1] >= lac for pos in metadata.write_positions(lac) if pos in fenced):
            return lac
        log.warning(
            "ledger %d: a bookie reports LAC %d, which no stored entry backs; recovering from below it",
            self.ledger_id,
            lac,
        )
        return -1

    async def _fence_one(self, bookie: str) -> tuple[int, int]:
        """(LAC, last stored entry) of one bookie, which is fenced from now on."""
        connection = await self._pool.get(bookie)
        response = await connection.fence(self.ledger_id, self._key)
        return response.last_add_confirmed, response.last_entry_id

    async def _read_for_recovery(self, metadata: LedgerMetadata, entry_id: int) -> bytes | None:
        """The entry's payload if any replica has it; None if it cannot have reached Qa."""
        write_set = metadata.write_set(entry_id)
        answers = await asyncio.gather(
            *(self._reader.read_from(b, entry_id) for b in write_set), return_exceptions=True
        )
        for answer in answers:
            if not isinstance(answer, BaseException):
                return answer.payload
        missing = sum(isinstance(a, NoSuchEntryError | NoSuchLedgerError) for a in answers)
        # An entry acknowledged to the writer is on at least Qa bookies of its write set, so it is
        # absent from at most Qw - Qa of them.
        if missing >= metadata.write_quorum - metadata.ack_quorum + 1:
            return None
        detail = {b: str(a) for b, a in zip(write_set, answers, strict=True)}
        corrupt = any(isinstance(a, CorruptEntryError | DigestMismatchError) for a in answers)
        why = (
            "only corrupt copies were found"
            if corrupt
            else "too many bookies of its write set are unreachable"
        )
        raise LedgerRecoveryError(self.ledger_id, f"entry {entry_id}: {why} ({detail})")


def _covers_every_ack_quorum(metadata: LedgerMetadata, answered: set[int]) -> bool:
    """True when every write set has at least Qw - Qa + 1 answering bookies: then any entry that
    reached Qa bookies is known to at least one of them."""
    needed = metadata.write_quorum - metadata.ack_quorum + 1
    return all(
        len(answered.intersection(metadata.write_positions(start))) >= needed
        for start in range(metadata.ensemble_size)
    )


def _with_state(metadata: LedgerMetadata, state: LedgerState) -> LedgerMetadata:
    return replace(metadata, state=state)
