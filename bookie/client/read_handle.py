"""Reading a ledger: closed ledgers to their last entry, open ones up to their LAC.

Each entry is read from the bookies of its write set in turn; a replica that is missing, corrupt,
fails its digest or cannot be reached is skipped for the next one, so one bad copy never fails a
read while a good copy exists. Ranges are read with bounded concurrency, which is what makes
catch-up reads fast.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from magnetar.bookie.client.batch_read import read_batched
from magnetar.bookie.client.bookie_connection import BookieConnectionPool, CorruptEntryError
from magnetar.bookie.client.errors import (
    BKError,
    BookieUnavailableError,
    DigestMismatchError,
    NoSuchEntryError,
    NoSuchLedgerError,
    ReadEntryError,
    ReadPastLacError,
)
from magnetar.bookie.client.ledger_manager import LedgerManager
from magnetar.bookie.client.ledger_metadata import LedgerMetadata, LedgerState
from magnetar.bookie.digest import verify


@dataclass(frozen=True)
class LedgerEntry:
    ledger_id: int
    entry_id: int
    payload: bytes


class EntryReader:
    """Reads single entries from their replicas, checking digests; shared by readers and recovery."""

    def __init__(self, ledger_id: int, pool: BookieConnectionPool, *, master_key: bytes = b"") -> None:
        self.ledger_id = ledger_id
        self._pool = pool
        #: given by recovery, whose reads the bookies check (plain reads carry no key)
        self._master_key = master_key

    async def read(self, metadata: LedgerMetadata, entry_id: int) -> LedgerEntry:
        failures: dict[str, str] = {}
        missing = 0
        for bookie in metadata.write_set(entry_id):
            try:
                return await self.read_from(bookie, entry_id)
            except (NoSuchEntryError, NoSuchLedgerError) as exc:
                missing += 1
                failures[bookie] = str(exc)
            except (CorruptEntryError, DigestMismatchError, BookieUnavailableError) as exc:
                failures[bookie] = str(exc)
        if missing == len(failures):
            raise NoSuchEntryError(self.ledger_id, entry_id, "on no bookie of its write set")
        raise ReadEntryError(self.ledger_id, entry_id, failures)

    async def read_range(
        self, metadata: LedgerMetadata, first: int, last: int, *, concurrency: int = 64
    ) -> list[LedgerEntry]:
        """Entries ``first..last``, in order: in batches from their replicas (see batch_read),
        then, ``concurrency`` at a time, alone (as ``read``) what no batch served."""
        wanted = list(range(first, last + 1))
        batched = await read_batched(
            self._pool, self.ledger_id, metadata.write_set, wanted, master_key=self._master_key
        )
        found = {e: LedgerEntry(self.ledger_id, e, entry.payload) for e, entry in batched.items()}
        limit = asyncio.Semaphore(concurrency)

        async def alone(entry_id: int) -> LedgerEntry:
            async with limit:
                return await self.read(metadata, entry_id)

        for entry in await asyncio.gather(*(alone(e) for e in wanted if e not in found)):
            found[entry.entry_id] = entry
        return [found[e] for e in wanted]

    async def read_from(self, bookie: str, entry_id: int) -> LedgerEntry:
        connection = await self._pool.get(bookie)
        response = await connection.read_entry(self.ledger_id, entry_id, master_key=self._master_key)
        entry = response.entry
        if (entry.ledger_id, entry.entry_id) != (self.ledger_id, entry_id) or not verify(
            entry.ledger_id, entry.entry_id, entry.last_add_confirmed, entry.payload, entry.digest
        ):
            raise DigestMismatchError(self.ledger_id, entry_id, bookie)
        return LedgerEntry(self.ledger_id, entry_id, entry.payload)


class ReadHandle:
    """A reader of one ledger. Open it through ``LedgerClient.open_ledger`` (with recovery: the
    ledger is closed and complete) or ``open_ledger_no_recovery`` (tailing a ledger still being
    written: reads stop at the LAC, which ``read_lac``/``wait_for_lac`` move forward)."""

    def __init__(
        self,
        ledger_id: int,
        metadata: LedgerMetadata,
        *,
        manager: LedgerManager,
        pool: BookieConnectionPool,
        read_concurrency: int = 64,
    ) -> None:
        self.ledger_id = ledger_id
        self._metadata = metadata
        self._manager = manager
        self._pool = pool
        self._reader = EntryReader(ledger_id, pool)
        self._read_concurrency = read_concurrency
        self._lac = metadata.last_entry_id if metadata.state == LedgerState.CLOSED else -1

    @property
    def metadata(self) -> LedgerMetadata:
        return self._metadata

    @property
    def is_closed(self) -> bool:
        return self._metadata.state == LedgerState.CLOSED

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first..last`` inclusive, in order; never past the LAC."""
        if last > self._lac:
            raise ReadPastLacError(self.ledger_id, last, self._lac)
        if first < 0 or first > last:
            raise ValueError(f"ledger {self.ledger_id}: bad entry range {first}..{last}")
        return await self._reader.read_range(self._metadata, first, last, concurrency=self._read_concurrency)

    async def read_entry(self, entry_id: int) -> LedgerEntry:
        return (await self.read(entry_id, entry_id))[0]

    async def read_lac(self) -> int:
        """Ask the bookies of the last ensemble for their LAC; the highest answer is safe to read."""
        if self.is_closed:
            return self._lac
        answers = await asyncio.gather(
            *(self._bookie_lac(b) for b in self._metadata.last_ensemble), return_exceptions=True
        )
        values = [a for a in answers if isinstance(a, int)]
        if not values:
            errors = "; ".join(str(a) for a in answers)
            raise BookieUnavailableError(",".join(self._metadata.last_ensemble), f"no LAC answer: {errors}")
        self._lac = max(self._lac, *values)
        return self._lac

    async def wait_for_lac(self, previous: int, timeout_s: float) -> int:
        """Long-poll: return as soon as the LAC passes ``previous`` (or at the timeout)."""
        if self._lac > previous or self.is_closed:
            return self._lac
        polls = [
            asyncio.create_task(self._bookie_lac(b, previous, int(timeout_s * 1000)))
            for b in self._metadata.last_ensemble
        ]
        try:
            for next_done in asyncio.as_completed(polls, timeout=timeout_s + 1):
                try:
                    lac = await next_done
                except (BKError, TimeoutError):
                    continue
                if lac > previous:
                    self._lac = max(self._lac, lac)
                    break
        except TimeoutError:
            pass
        finally:
            for poll in polls:
                poll.cancel()
        return self._lac

    async def refresh_metadata(self) -> LedgerMetadata:
        """Re-read the metadata: a tailing reader learns of ensemble changes and of the close."""
        self._metadata = (await self._manager.read(self.ledger_id)).metadata
        if self.is_closed:
            self._lac = self._metadata.last_entry_id
        return self._metadata

    async def _bookie_lac(self, bookie: str, previous: int = -1, long_poll_ms: int = 0) -> int:
        connection = await self._pool.get(bookie)
        try:
            return await connection.read_lac(self.ledger_id, previous_lac=previous, long_poll_ms=long_poll_ms)
        except NoSuchLedgerError:
            return -1  # the bookie has no entry of this ledger yet
