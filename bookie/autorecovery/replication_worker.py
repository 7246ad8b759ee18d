"""The replication worker: restores Qw copies of the entries of marked ledgers.

Each bookie runs one. It claims a marked ledger under an ephemeral lock, and for every fragment
whose ensemble holds a bookie to replace it picks a replacement (rack-aware), copies each entry
that bookie held from a surviving replica (digest checked, so a corrupt copy is never spread)
to the replacement, then swaps the fragment's ensemble in the ledger metadata by
compare-and-set. The mark is removed once no fragment needs replacing, unless someone added to
it meanwhile. An open ledger's last fragment belongs to its writer, which replaces failed
bookies itself; only after ``open_ledger_rereplication_grace_period`` does the worker fence and
close the ledger (its writer is presumably gone) to recover that fragment too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass

from magnetar.bookie.autorecovery.marks import Mark, UnderReplication
from magnetar.bookie.client import (
    BKError,
    LedgerClient,
    LedgerMetadata,
    LedgerState,
    NoSuchLedgerError,
    read_batched,
)
from magnetar.bookie.digest import verify
from magnetar.bookie.layout import READONLY_BOOKIES, UNDER_REPLICATED, WRITABLE_BOOKIES
from magnetar.common.metadata import BadVersionError, MetadataError, MetadataStore, WatchEvent
from magnetar.proto import bookie_pb2 as pb

log = logging.getLogger(__name__)

#: entries of a fragment read (in batches) and then copied together
_WINDOW = 256


class ReplicationError(BKError):
    pass


@dataclass(frozen=True)
class WorkerSettings:
    rate_bytes_per_s: int = -1
    open_ledger_grace_s: float = 30.0
    poll_interval_s: float = 1.0


class Throttle:
    """A token bucket over bytes per second (BookKeeper's replicationRateByBytes)."""

    def __init__(self, rate: int) -> None:
        self._rate = rate
        self._allowance = float(max(rate, 0))
        self._last = time.monotonic()

    async def take(self, size: int) -> None:
        if self._rate <= 0:
            return
        now = time.monotonic()
        self._allowance = min(float(self._rate), self._allowance + (now - self._last) * self._rate)
        self._last = now
        self._allowance -= size
        if self._allowance < 0:
            await asyncio.sleep(-self._allowance / self._rate)


@dataclass
class Progress:
    """What this worker has done, for logs and metrics."""

    ledgers: int = 0
    fragments: int = 0
    entries: int = 0
    bytes: int = 0


class ReplicationWorker:
    def __init__(self, store: MetadataStore, client: LedgerClient, settings: WorkerSettings) -> None:
        self._store = store
        self._client = client
        self._settings = settings
        self._marks = UnderReplication(store)
        self._throttle = Throttle(settings.rate_bytes_per_s)
        self._wake = asyncio.Event()
        self.progress = Progress()

    async def run(self) -> None:
        self._store.watch(UNDER_REPLICATED, self._on_marks, children=True)
        try:
            while True:
                try:
                    worked = await self.run_once()
                except (MetadataError, BKError) as exc:
                    log.warning("replication pass interrupted (%s); retrying", exc)
                    worked = False
                if not worked:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), self._settings.poll_interval_s)
                    self._wake.clear()
        finally:
            self._store.unwatch(UNDER_REPLICATED, self._on_marks)

    def _on_marks(self, _event: WatchEvent) -> None:
        self._wake.set()

    async def run_once(self) -> bool:
        """One pass over the marks; True if a ledger was fully re-replicated."""
        ledgers = await self._marks.ledgers()
        random.shuffle(ledgers)  # workers on several bookies start on different ledgers
        done = False
        for ledger_id in ledgers:
            if not await self._marks.lock(ledger_id):
                continue
            try:
                done = await self.replicate(ledger_id) or done
            except BKError as exc:
                log.error("ledger %d stays under-replicated: %s", ledger_id, exc)
            finally:
                await self._marks.unlock(ledger_id)
        return done

    async def replicate(self, ledger_id: int) -> bool:
        """Re-replicate one claimed ledger; True when its mark could be removed."""
        found = await self._marks.get(ledger_id)
        if found is None:
            return False
        mark, version = found
        try:
            metadata = await self._client.ledger_metadata(ledger_id)
        except NoSuchLedgerError:
            return await self._marks.release(ledger_id, version)  # deleted: nothing to keep
        replace = await self._to_replace(mark, metadata)
        if replace and metadata.state is not LedgerState.CLOSED:
            if set(metadata.last_ensemble) & replace:
                waited_s = time.time() - mark.marked_ms / 1000
                if waited_s < self._settings.open_ledger_grace_s:
                    return False  # its writer may still replace the bookie itself
                log.warning(
                    "ledger %d still open after %.0fs: recovering it to re-replicate", ledger_id, waited_s
                )
                await self._client.open_ledger(ledger_id)  # fences the writer, closes the ledger
            metadata = await self._client.ledger_metadata(ledger_id)
            replace = await self._to_replace(mark, metadata)
        last = (
            metadata.last_entry_id if metadata.state is LedgerState.CLOSED else metadata.ensembles[-1][0] - 1
        )
        for first, end, ensemble in metadata.fragments(last):
            if replace & set(ensemble):
                await self._replicate_fragment(ledger_id, metadata, first, end, ensemble, replace)
        if await self._marks.release(ledger_id, version):
            self.progress.ledgers += 1
            log.info("ledger %d fully replicated again", ledger_id)
            return True
        return False

    async def _to_replace(self, mark: Mark, metadata: LedgerMetadata) -> set[str]:
        """Bookies of the ledger to replace: lost ones still gone, and every drained one."""
        live: set[str] = set()
        for parent in (WRITABLE_BOOKIES, READONLY_BOOKIES):
            with contextlib.suppress(MetadataError):
                live.update(await self._store.children(parent))
        return ((set(mark.lost) - live) | set(mark.drain)) & metadata.bookies()

    async def _replicate_fragment(
        self,
        ledger_id: int,
        metadata: LedgerMetadata,
        first: int,
        last: int,
        ensemble: tuple[str, ...],
        replace: set[str],
    ) -> None:
        target = ensemble
        for bookie in sorted(replace & set(ensemble)):
            target = await self._client.placement.replace(
                target, bookie, exclude=replace, write_quorum=metadata.write_quorum
            )
        changed = {p for p, (a, b) in enumerate(zip(ensemble, target, strict=True)) if a != b}

        def sources(entry_id: int) -> list[str]:
            return [ensemble[p] for p in metadata.write_positions(entry_id) if p not in changed]

        def destinations(entry_id: int) -> list[str]:
            return [target[p] for p in metadata.write_positions(entry_id) if p in changed]

        for start in range(first, last + 1, _WINDOW):
            wanted = [e for e in range(start, min(start + _WINDOW, last + 1)) if destinations(e)]
            read = await read_batched(self._client.pool, ledger_id, sources, wanted)
            for entry_id in wanted:
                if entry_id not in read:  # no batch served it: read alone, for the error if none has it
                    read[entry_id] = await self._read_intact(ledger_id, entry_id, sources(entry_id))
            await asyncio.gather(*(self._copy(read[e], destinations(e), metadata.master_key) for e in wanted))
        await self._swap(ledger_id, first, ensemble, target)
        self.progress.fragments += 1
        log.info(
            "ledger %d fragment %d..%d: %s -> %s",
            ledger_id,
            first,
            last,
            sorted(set(ensemble) - set(target)),
            sorted(set(target) - set(ensemble)),
        )

    async def _copy(self, entry: pb.Entry, destinations: list[str], master_key: bytes) -> None:
        await self._throttle.take(len(entry.payload) * len(destinations))
        for bookie in destinations:
            connection = await self._client.pool.get(bookie)
            # A recovery add: the ledger may be fenced or closed, and the copy must still land.
            await connection.add(entry, master_key, recovery=True)
        self.progress.entries += 1
        self.progress.bytes += len(entry.payload) * len(destinations)

    async def _read_intact(self, ledger_id: int, entry_id: int, sources: list[str]) -> pb.Entry:
        errors = []
        for bookie in sources:
            try:
                connection = await self._client.pool.get(bookie)
                entry = (await connection.read_entry(ledger_id, entry_id)).entry
            except BKError as exc:
                errors.append(f"{bookie}: {exc}")
                continue
            if verify(entry.ledger_id, entry.entry_id, entry.last_add_confirmed, entry.payload, entry.digest):
                return entry
            errors.append(f"{bookie}: digest mismatch")
        tried = "; ".join(errors) or "no replica"
        raise ReplicationError(
            f"entry {ledger_id}:{entry_id} has no intact replica left to copy from ({tried})"
        )

    async def _swap(self, ledger_id: int, first: int, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        """Put ``new`` in place of ``old`` for the fragment at ``first``, by compare-and-set."""
        while True:
            current = await self._client.manager.read(ledger_id)
            ensembles = dict(current.metadata.ensembles)
            if ensembles.get(first) == new:
                return
            if ensembles.get(first) != old:
                raise ReplicationError(
                    f"ledger {ledger_id} fragment {first} changed while being re-replicated "
                    f"({ensembles.get(first)}); will retry"
                )
            with contextlib.suppress(BadVersionError):
                await self._client.manager.write(
                    ledger_id, current.metadata.with_fragment_ensemble(first, new), current.version
                )
                return
