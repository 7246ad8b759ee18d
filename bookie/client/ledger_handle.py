"""Writing a ledger: striped write quorums, ack quorums, in-order completion, ensemble change.

Each entry goes to its Qw bookies (``LedgerMetadata.write_set``) and counts as written once Qa of
them have made it durable. Completions are delivered in entry order, and the LAC (last add
confirmed) only moves over a contiguous prefix of written entries; every entry carries the LAC of
its moment, which is how readers learn what they may read.

When a bookie fails mid-stream, the writer replaces it (BookKeeper's ensemble change): a new
ensemble starts at LAC + 1, the ledger metadata is updated by compare-and-set, and every entry not
yet written is sent again to the replacement. If the compare-and-set finds the ledger no longer
OPEN, a recovering reader has fenced it, and the writer stops with ``LedgerFencedError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from magnetar.bookie.client.add_request import EncodedEntry
from magnetar.bookie.client.bookie_connection import BookieConnection, BookieConnectionPool
from magnetar.bookie.client.ensemble import EnsemblePlacement
from magnetar.bookie.client.errors import (
    BKError,
    BookieUnavailableError,
    LedgerClosedError,
    LedgerFencedError,
    ReadPastLacError,
)
from magnetar.bookie.client.ledger_manager import LedgerManager, VersionedMetadata
from magnetar.bookie.client.ledger_metadata import LedgerMetadata, LedgerState
from magnetar.bookie.client.read_handle import EntryReader, LedgerEntry
from magnetar.bookie.digest import entry_digest
from magnetar.common.metadata.store import BadVersionError
from magnetar.proto import bookie_pb2 as pb

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _PendingAdd:
    entry_id: int
    payload: bytes
    future: asyncio.Future[int]
    #: serialized when first sent, once for all its bookies; resent unchanged to replacements
    message: EncodedEntry | None = None
    acked: set[int] = field(default_factory=set)  # ensemble positions that made it durable


class LedgerHandle:
    """The single writer of one ledger. Create it through ``LedgerClient.create_ledger``."""

    def __init__(
        self,
        ledger_id: int,
        versioned: VersionedMetadata,
        *,
        manager: LedgerManager,
        pool: BookieConnectionPool,
        placement: EnsemblePlacement,
        last_add_confirmed: int = -1,
        length: int = 0,
        recovery: bool = False,
        explicit_lac_interval_s: float = 0.0,
    ) -> None:
        self.ledger_id = ledger_id
        self._metadata = versioned.metadata
        self._version = versioned.version
        self._master_key = versioned.metadata.master_key
        self._manager = manager
        self._pool = pool
        self._placement = placement
        self._recovery = recovery
        self._lac = last_add_confirmed
        self._next_entry_id = last_add_confirmed + 1
        self._length = length
        self._pending: OrderedDict[int, _PendingAdd] = OrderedDict()
        self._connections: dict[str, BookieConnection] = {}
        self._failed_bookies: set[str] = set()
        self._ensemble_change: asyncio.Task[None] | None = None
        self._error: BKError | None = None
        self._closing = False
        self._closed = False
        self._explicit_lac_interval_s = explicit_lac_interval_s
        self._lac_task: asyncio.Task[None] | None = None
        self._lac_written = last_add_confirmed

    async def start(self) -> None:
        await self._connect(self._metadata.last_ensemble)
        if self._explicit_lac_interval_s > 0:
            self._lac_task = asyncio.create_task(self._explicit_lac_loop())

    async def _connect(self, ensemble: tuple[str, ...]) -> None:
        for bookie in ensemble:
            if bookie not in self._connections:
                self._connections[bookie] = await self._pool.get(bookie)

    # -- public API -------------------------------------------------------------------------------

    @property
    def metadata(self) -> LedgerMetadata:
        return self._metadata

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def length(self) -> int:
        return self._length

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    async def add_entry(self, payload: bytes) -> int:
        """Write one entry and return its id once Qa bookies have it (in order with earlier adds)."""
        return await self.add_entry_async(payload)

    def add_entry_async(self, payload: bytes) -> asyncio.Future[int]:
        """Queue an entry without waiting: callers pipeline many adds and await the futures."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self._error is not None:
            future.set_exception(self._error)
            return future
        if self._closing or self._closed:
            future.set_exception(LedgerClosedError(self.ledger_id))
            return future
        pending = _PendingAdd(self._next_entry_id, bytes(payload), future)
        self._next_entry_id += 1
        self._pending[pending.entry_id] = pending
        if self._ensemble_change is None:
            self._send(pending)
        return future

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first..last`` this writer has had confirmed, read back from their bookies.

        The writer's own LAC bounds the range, not the bookies' (which trails by one entry until
        the next add or explicit LAC): what this writer confirmed is durable on Qa bookies.
        """
        if first < 0 or first > last or last > self._lac:
            raise ReadPastLacError(self.ledger_id, last, self._lac)
        return await EntryReader(self.ledger_id, self._pool).read_range(self._metadata, first, last)

    async def close(self) -> LedgerMetadata:
        """Wait for every queued add, then record the ledger as CLOSED at its LAC."""
        if self._closed:
            return self._metadata
        self._closing = True
        if self._pending:
            await asyncio.gather(*(p.future for p in list(self._pending.values())), return_exceptions=True)
        while self._ensemble_change is not None:
            await asyncio.shield(self._ensemble_change)
        await self._stop_lac_task()
        if self._error is not None:
            raise self._error
        await self._write_closed_metadata()
        self._closed = True
        return self._metadata

    async def write_lac(self) -> None:
        """Send the LAC explicitly to the bookies that store its entry, so readers can see the
        last entry while no further add carries it (BookKeeper's explicit LAC). Other bookies
        would refuse it: a bookie takes no LAC past the entries it stores."""
        lac = self._lac
        if lac < 0:
            return
        write_set = self._metadata.write_set(lac)
        await self._connect(tuple(write_set))
        results = await asyncio.gather(
            *(self._connections[b].write_lac(self.ledger_id, lac, self._master_key) for b in write_set),
            return_exceptions=True,
        )
        if any(not isinstance(r, BaseException) for r in results):
            self._lac_written = max(self._lac_written, lac)

    # -- sending and acks -------------------------------------------------------------------------

    def _send(self, pending: _PendingAdd, positions: list[int] | None = None) -> None:
        if pending.message is None:
            digest = entry_digest(self.ledger_id, pending.entry_id, self._lac, pending.payload)
            pending.message = EncodedEntry.of(
                pb.Entry(
                    ledger_id=self.ledger_id,
                    entry_id=pending.entry_id,
                    last_add_confirmed=self._lac,
                    digest=digest,
                    payload=pending.payload,
                )
            )
        ensemble = self._metadata.ensemble_for(pending.entry_id)
        for position in (
            positions if positions is not None else self._metadata.write_positions(pending.entry_id)
        ):
            bookie = ensemble[position]
            self._connections[bookie].add_then(
                pending.message,
                self._master_key,
                functools.partial(self._on_bookie_result, pending, position, bookie),
                recovery=self._recovery,
            )

    def _on_bookie_result(
        self, pending: _PendingAdd, position: int, bookie: str, error: BKError | None
    ) -> None:
        if pending.future.done() or self._error is not None:
            return
        # An answer from a bookie that has since been replaced at this position means nothing.
        if self._metadata.ensemble_for(pending.entry_id)[position] != bookie:
            return
        if error is None:
            pending.acked.add(position)
            if len(pending.acked) >= self._metadata.ack_quorum:
                self._complete_in_order()
            return
        if isinstance(error, LedgerFencedError):
            self._fail(error)
        else:
            self._bookie_failed(bookie, error)

    def _complete_in_order(self) -> None:
        quorum = self._metadata.ack_quorum
        while self._pending:
            first = next(iter(self._pending.values()))
            if len(first.acked) < quorum:
                return
            del self._pending[first.entry_id]
            self._lac = first.entry_id
            self._length += len(first.payload)
            if not first.future.done():
                first.future.set_result(first.entry_id)

    def _fail(self, error: BKError) -> None:
        if self._error is None:
            self._error = error
            log.warning("ledger %d: writer stops: %s", self.ledger_id, error)
        pending, self._pending = self._pending, OrderedDict()
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(error)

    # -- ensemble change --------------------------------------------------------------------------

    def _bookie_failed(self, bookie: str, error: BKError) -> None:
        if bookie in self._failed_bookies and self._ensemble_change is not None:
            return
        log.warning("ledger %d: bookie %s failed (%s); changing ensemble", self.ledger_id, bookie, error)
        self._failed_bookies.add(bookie)
        if self._ensemble_change is None:
            self._ensemble_change = asyncio.create_task(self._change_ensemble())

    async def _change_ensemble(self) -> None:
        try:
            while self._error is None and (set(self._metadata.last_ensemble) & self._failed_bookies):
                await self._replace_failed_bookies()
            # Replaced: a bookie that failed is out of the ensemble, and once it is back it is a
            # candidate again, as in BookKeeper. Kept out for the writer's life, a rolling restart
            # of the bookies left a long-lived ledger without replacements (NotEnoughBookies).
            self._failed_bookies.clear()
        except BKError as exc:
            self._fail(exc)
        except Exception as exc:  # anything unexpected must still release the waiting adds
            self._fail(BookieUnavailableError(",".join(sorted(self._failed_bookies)), repr(exc)))
        finally:
            self._ensemble_change = None
        if self._error is None:
            # Entries queued during the change were not sent yet; entries already sent go to the
            # replacements only (the surviving bookies have them or will answer for them).
            for pending in list(self._pending.values()):
                if pending.message is None:
                    self._send(pending)

    async def _replace_failed_bookies(self) -> None:
        first_entry = self._lac + 1
        old = self._metadata.last_ensemble
        ensemble = old
        clock = asyncio.get_running_loop().time
        started = clock()
        for failed in [b for b in old if b in self._failed_bookies]:
            ensemble = await self._placement.replace(
                ensemble, failed, exclude=self._failed_bookies, write_quorum=self._metadata.write_quorum
            )
        chosen = clock()
        if not await self._reachable([b for b in ensemble if b not in old]):
            return  # the caller's loop chooses again without it
        await self._connect(ensemble)
        connected = clock()
        metadata = self._metadata.with_ensemble(first_entry, ensemble)
        await self._write_metadata(metadata)
        # Where a change's time went (a writer's adds wait for it): choosing, connecting, the
        # metadata's compare-and-set.
        log.info(
            "ledger %d: ensemble from entry %d is now %s (chosen in %.2f s, connected in %.2f s, "
            "written in %.2f s)",
            self.ledger_id,
            first_entry,
            list(ensemble),
            chosen - started,
            connected - chosen,
            clock() - connected,
        )
        changed = [pos for pos, (a, b) in enumerate(zip(old, ensemble, strict=True)) if a != b]
        for pending in list(self._pending.values()):
            if pending.message is None or pending.entry_id < first_entry:
                continue
            resend = [p for p in self._metadata.write_positions(pending.entry_id) if p in changed]
            pending.acked.difference_update(resend)
            if resend:
                self._send(pending, resend)

    async def _reachable(self, replacements: list[str]) -> bool:
        """Whether every replacement connects; one that does not is counted as failed. A bookie
        just made again elsewhere (a pod restarted: its name, a new address) is first tried at its
        old address; waiting for the connection gives it the moment it needs, where an add sent at
        once failed, left no replacement and stopped the writer (a ledger recovery of seconds)."""
        unreachable = []
        for bookie in replacements:
            if not await (await self._pool.get(bookie)).connected():
                unreachable.append(bookie)
        for bookie in unreachable:
            log.warning("ledger %d: replacement bookie %s does not connect", self.ledger_id, bookie)
            self._failed_bookies.add(bookie)
        return not unreachable

    async def _write_metadata(self, metadata: LedgerMetadata) -> None:
        """Compare-and-set the ledger metadata; a ledger that stopped being ours means fencing."""
        expected_state = LedgerState.IN_RECOVERY if self._recovery else LedgerState.OPEN
        while True:
            try:
                written = await self._manager.write(self.ledger_id, metadata, self._version)
            except BadVersionError:
                current = await self._manager.read(self.ledger_id)
                if current.metadata.state != expected_state:
                    raise LedgerFencedError(self.ledger_id) from None
                # Someone rewrote it without taking it from us (e.g. auto-recovery moved a closed
                # fragment): keep their ensembles for the past, ours for the future.
                self._version = current.version
                merged = current.metadata
                for first, ensemble in metadata.ensembles:
                    if first >= current.metadata.ensembles[-1][0]:
                        merged = merged.with_ensemble(first, ensemble)
                metadata = replace(metadata, ensembles=merged.ensembles)
                continue
            self._metadata, self._version = written.metadata, written.version
            return

    async def _write_closed_metadata(self) -> None:
        try:
            await self._write_metadata(self._metadata.closed_at(self._lac, self._length))
        except LedgerFencedError:
            current = await self._manager.read(self.ledger_id)
            # A concurrent recovery may have closed it exactly where we are: nothing was lost.
            if current.metadata.state == LedgerState.CLOSED and current.metadata.last_entry_id == self._lac:
                self._metadata, self._version = current.metadata, current.version
                return
            raise

    # -- explicit LAC -----------------------------------------------------------------------------

    async def _explicit_lac_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self._explicit_lac_interval_s)
            if self._lac > self._lac_written and not self._pending and self._ensemble_change is None:
                with contextlib.suppress(BKError):
                    await self.write_lac()

    async def _stop_lac_task(self) -> None:
        if self._lac_task is not None:
            self._lac_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lac_task
            self._lac_task = None
