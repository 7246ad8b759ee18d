"""One storage node: journal + ledger storage, recovery at start, periodic checkpoints.

The write path of an add request: check every entry (master key, digest, fencing), put the accepted ones in
ledger storage (readable at once, LAC updated), queue ONE journal record holding all of them, and
answer once that record is durable. Fences and explicit LACs go through the journal the same way,
so they survive ``kill -9``. The gRPC layer (``server.py``) only translates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from magnetar.bookie import checkpoint, journal
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.digest import verify
from magnetar.bookie.entry_log import CorruptEntryError, StoredEntry, encode_record, iter_records
from magnetar.bookie.journal import Journal, journal_files
from magnetar.bookie.ledger_storage import LedgerStorage, NoSuchLedgerError
from magnetar.common.latency import LatencyHistogram
from magnetar.proto import bookie_pb2 as pb

log = logging.getLogger(__name__)

_KEY = struct.Struct(">qqq")  # ledger, entry, lac at offset 8 of an entry-log record

ReadOnlyListener = Callable[[bool], None]


class ReadOnlyError(Exception):
    pass


class UnauthorizedError(Exception):
    """The master key given is not the ledger's (BookKeeper's UnauthorizedAccessException)."""


class BadRequestError(Exception):
    """A request no correct client sends (BookKeeper's EBADREQ)."""


def _all(waits: list[asyncio.Future[None]]) -> asyncio.Future[None]:
    if len(waits) == 1:
        return waits[0]
    return asyncio.ensure_future(_gather(waits))


async def _gather(waits: list[asyncio.Future[None]]) -> None:
    # Every wait is awaited (none left unretrieved); the first failure is raised.
    results = await asyncio.gather(*waits, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


def journal_failed(response: pb.AddResponse, detail: str) -> pb.AddResponse:
    """The response for a request whose journal write failed: its accepted entries are not."""
    failed = pb.AddResponse()
    for result in response.results:
        if result.reason == pb.OK:
            failed.results.add(
                ledger_id=result.ledger_id,
                entry_id=result.entry_id,
                reason=pb.INTERNAL,
                message=f"entry {result.ledger_id}:{result.entry_id} not durable: {detail}",
            )
        else:
            failed.results.append(result)
    return failed


@dataclass
class BookieStats:
    """Counters since start, read by ``metrics.py`` at scrape time (no cost on the add path)."""

    adds: int = 0
    add_bytes: int = 0
    refused_adds: int = 0
    reads: int = 0
    corrupt_reads: int = 0
    #: add requests by the way they came: "grpc" (the AddEntries stream) or "framed" (the add port)
    add_requests: dict[str, int] = field(default_factory=lambda: {"grpc": 0, "framed": 0})
    #: an add request's time in the bookie: decoded to answered (journal durable included)
    add_request_latency: LatencyHistogram = field(default_factory=LatencyHistogram)


class Bookie:
    def __init__(self, config: BookieConfig) -> None:
        self.config = config
        self.stats = BookieStats()
        self.ledger_dirs = [Path(d) for d in config.ledger_directories]
        self.storage = LedgerStorage(self.ledger_dirs, config.entry_log_size_limit)
        self.journal = Journal(
            Path(config.journal_directory),
            sync_data=config.journal_sync_data,
            max_group_wait_ms=config.journal_max_group_wait_msec,
            buffered_writes_threshold=config.journal_buffered_writes_threshold,
            max_file_bytes=config.journal_max_size_mb * 1024 * 1024,
            prealloc_bytes=config.journal_pre_alloc_size_mb * 1024 * 1024,
        )
        self._read_only = False
        self._forced_read_only = False
        self._listeners: list[ReadOnlyListener] = []
        self._checkpoint_lock = asyncio.Lock()
        self._last_mark: journal.Mark | None = None
        self._checkpointer: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Rebuild state from entry logs + checkpoint + journal, then accept requests."""
        for directory in self.ledger_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        self.journal.directory.mkdir(parents=True, exist_ok=True)
        saved = await asyncio.to_thread(checkpoint.load, self.ledger_dirs)
        await self.storage.open()
        self.storage.restore(saved.ledgers)
        replayed = await self._replay(saved.mark)
        next_file = max([saved.mark.file_id, *journal_files(self.journal.directory)], default=-1) + 1
        self.journal.start(next_file)
        await self.checkpoint()
        log.info(
            "bookie storage open: %d ledgers, %d journal records replayed",
            len(self.storage.ledgers()),
            replayed,
        )
        self._checkpointer = asyncio.create_task(self._checkpoint_loop(), name="bookie-checkpoint")

    async def _replay(self, mark: journal.Mark) -> int:
        records = await asyncio.to_thread(lambda: list(journal.read_records(self.journal.directory, mark)))
        for record_type, body in records:
            if record_type == journal.ADD:
                for offset, size in iter_records(body):
                    ledger_id, entry_id, lac = _KEY.unpack_from(body, offset + 8)
                    self.storage.put(ledger_id, entry_id, lac, body[offset : offset + size])
            elif record_type == journal.FENCE:
                self.storage.fence(journal.decode_fence(body))
            elif record_type == journal.LAC:
                self.storage.set_lac(*journal.decode_lac(body))
            elif record_type == journal.KEY:
                self.storage.set_key(*journal.decode_key(body))
        return len(records)

    async def close(self) -> None:
        """Finish queued journal writes, checkpoint, close files."""
        if self._checkpointer is not None:
            self._checkpointer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checkpointer
        await self.journal.close()
        await self.checkpoint()
        await self.storage.close()

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.flush_interval / 1000)
            try:
                await self.checkpoint()
            except OSError as exc:
                log.error("checkpoint failed (journal files kept): %s", exc)

    async def checkpoint(self) -> None:
        """Make the entry logs durable up to the journal's current position, then drop older
        journal files."""
        async with self._checkpoint_lock:
            mark = self.journal.position
            if mark == self._last_mark:
                return
            # Everything appended to the journal before `mark` is already in ledger storage
            # (put happens before append, in the same step on the event loop).
            saved = checkpoint.Checkpoint(mark, self.storage.snapshot())
            await self.storage.flush()
            await asyncio.to_thread(checkpoint.save, self.ledger_dirs, saved)
            await self.journal.remove_before(mark.file_id)
            self._last_mark = mark

    # -- read-only mode --------------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        return self._read_only or self._forced_read_only

    def on_read_only_change(self, listener: ReadOnlyListener) -> None:
        self._listeners.append(listener)

    def set_read_only(self, read_only: bool, *, forced: bool = False) -> None:
        """Enter or leave read-only mode (``forced``: an operator's or test's choice, kept apart
        from the disk monitor's so one does not undo the other)."""
        before = self.read_only
        if forced:
            self._forced_read_only = read_only
        else:
            self._read_only = read_only
        if self.read_only != before:
            log.warning("bookie is now %s", "read-only" if self.read_only else "writable")
            for listener in self._listeners:
                listener(self.read_only)

    # -- requests --------------------------------------------------------------------------------

    def add(self, request: pb.AddRequest) -> tuple[asyncio.Future[None] | None, pb.AddResponse]:
        """Store the acceptable entries of ``request`` and journal them as one record.

        Returns the future to await (None when nothing was accepted) and the response to send
        once it completes; refused entries carry their reason in the response already. An entry
        this bookie already stores is settled after a read of the stored copy (``_settle``).
        """
        response = pb.AddResponse()
        records: list[bytes] = []
        waits: list[asyncio.Future[None]] = []
        duplicates: list[tuple[pb.AddResult, pb.Entry]] = []
        read_only = self.read_only
        for entry in request.entries:
            ledger_id, entry_id = entry.ledger_id, entry.entry_id
            key = request.master_keys.get(ledger_id, b"")
            reason, message = self._check_add(entry, key, request.recovery, read_only)
            # Added in place: ``_settle`` may still change the result before it is sent.
            result = response.results.add(
                ledger_id=ledger_id, entry_id=entry_id, reason=reason, message=message
            )
            if reason != pb.OK:
                self.stats.refused_adds += 1
                continue
            if (recorded := self._record_key(ledger_id, key)) is not None:
                waits.append(recorded)
            if self.storage.has_entry(ledger_id, entry_id):
                duplicates.append((result, entry))
                continue
            records.append(self._put(entry))
        if records:
            waits.append(self.journal.append(journal.ADD, b"".join(records)))
        if duplicates:
            waits.append(asyncio.ensure_future(self._settle(duplicates)))
        if not waits:
            return None, response
        return _all(waits), response

    def _put(self, entry: pb.Entry) -> bytes:
        record = encode_record(
            entry.ledger_id, entry.entry_id, entry.last_add_confirmed, entry.digest, entry.payload
        )
        self.storage.put(entry.ledger_id, entry.entry_id, entry.last_add_confirmed, record)
        self.stats.adds += 1
        self.stats.add_bytes += len(entry.payload)
        return record

    async def _settle(self, duplicates: list[tuple[pb.AddResult, pb.Entry]]) -> None:
        """Adds of entries already stored: the same payload again is accepted (recovery and
        re-replication send it) and journaled again, so the answer waits until the stored copy
        is durable too; a different payload is refused and nothing is replaced."""
        records: list[bytes] = []
        for result, entry in duplicates:
            try:
                stored = await self.storage.read(entry.ledger_id, entry.entry_id)
            except CorruptEntryError as exc:
                log.warning("replacing a corrupt stored copy with the one added again: %s", exc)
            else:
                if stored.payload != entry.payload:
                    self.stats.refused_adds += 1
                    result.reason = pb.DUPLICATE_ENTRY_ID
                    result.message = (
                        f"entry {entry.ledger_id}:{entry.entry_id} is stored with another payload; "
                        "an acknowledged entry is never replaced"
                    )
                    continue
            records.append(self._put(entry))
        if records:
            await self.journal.append(journal.ADD, b"".join(records))

    def _check_add(
        self, entry: pb.Entry, key: bytes, recovery: bool, read_only: bool
    ) -> tuple[pb.Reason, str]:
        ledger_id, entry_id = entry.ledger_id, entry.entry_id
        if read_only:
            return (
                pb.BOOKIE_READ_ONLY,
                f"bookie is read-only (disk full); entry {ledger_id}:{entry_id} refused",
            )
        if ledger_id < 0 or entry_id < 0:
            return pb.INVALID_REQUEST, f"entry {ledger_id}:{entry_id}: ledger and entry ids must be >= 0"
        if not -1 <= entry.last_add_confirmed < entry_id:
            return pb.INVALID_REQUEST, (
                f"entry {ledger_id}:{entry_id}: its piggybacked LAC {entry.last_add_confirmed} must lie "
                "between -1 and the entry before it"
            )
        if (refusal := self._key_refusal(ledger_id, key)) is not None:
            return pb.UNAUTHORIZED_ACCESS, refusal
        if not verify(ledger_id, entry_id, entry.last_add_confirmed, entry.payload, entry.digest):
            return pb.DIGEST_MISMATCH, (
                f"entry {ledger_id}:{entry_id}: digest {entry.digest:#010x} does not match its bytes; "
                "not stored"
            )
        if not recovery and self.storage.is_fenced(ledger_id):
            return pb.LEDGER_FENCED, f"ledger {ledger_id} is fenced; entry {entry_id} refused"
        return pb.OK, ""

    # -- master keys -----------------------------------------------------------------------------

    def _key_refusal(self, ledger_id: int, key: bytes) -> str | None:
        """Why ``key`` may not act on ``ledger_id``, or None (a ledger not yet keyed takes any)."""
        state = self.storage.find(ledger_id)
        if state is None or state.master_key is None or state.master_key == key:
            return None
        return f"ledger {ledger_id}: master key does not match the ledger's"

    def check_key(self, ledger_id: int, key: bytes) -> None:
        if (refusal := self._key_refusal(ledger_id, key)) is not None:
            raise UnauthorizedError(refusal)

    def _record_key(self, ledger_id: int, key: bytes) -> asyncio.Future[None] | None:
        """Record the first key seen for a ledger, journaled ahead of what it came with."""
        state = self.storage.find(ledger_id)
        if state is not None and state.master_key is not None:
            return None
        self.storage.set_key(ledger_id, key)
        return self.journal.append(journal.KEY, journal.encode_key(ledger_id, key))

    # -- fencing and explicit LAC ----------------------------------------------------------------

    async def fence(self, ledger_id: int, key: bytes) -> tuple[int, int]:
        """Fence durably; returns (LAC, highest stored entry id)."""
        self.check_key(ledger_id, key)
        recorded = self._record_key(ledger_id, key)
        state = self.storage.fence(ledger_id)
        await self.journal.append(journal.FENCE, journal.encode_fence(ledger_id))
        if recorded is not None:
            await recorded
        return state.lac, state.last_entry

    async def write_lac(self, ledger_id: int, lac: int, key: bytes) -> None:
        if self.read_only:
            raise ReadOnlyError(f"bookie is read-only; explicit LAC {lac} of ledger {ledger_id} refused")
        state = self.storage.find(ledger_id)
        if state is None:
            raise NoSuchLedgerError(ledger_id)
        self.check_key(ledger_id, key)
        if lac > state.last_entry:
            raise BadRequestError(
                f"explicit LAC {lac} of ledger {ledger_id} is past the last entry this bookie "
                f"stores ({state.last_entry})"
            )
        recorded = self._record_key(ledger_id, key)
        self.storage.set_lac(ledger_id, lac)
        await self.journal.append(journal.LAC, journal.encode_lac(ledger_id, lac))
        if recorded is not None:
            await recorded

    async def read(self, ledger_id: int, entry_id: int) -> StoredEntry:
        try:
            stored = await self.storage.read(ledger_id, entry_id)
        except CorruptEntryError:
            self.stats.corrupt_reads += 1
            raise
        self.stats.reads += 1
        return stored

    async def read_many(
        self, ledger_id: int, entry_ids: list[int], max_bytes: int
    ) -> list[tuple[int, StoredEntry | Exception]]:
        """A batch read (see LedgerStorage.read_many), counted entry by entry as ``read`` counts."""
        answered = await self.storage.read_many(ledger_id, entry_ids, max_bytes)
        for _, found in answered:
            if isinstance(found, StoredEntry):
                self.stats.reads += 1
            elif isinstance(found, CorruptEntryError):
                self.stats.corrupt_reads += 1
        return answered

    def lac(self, ledger_id: int) -> int | None:
        state = self.storage.find(ledger_id)
        return None if state is None else state.lac
