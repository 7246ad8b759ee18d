"""The journal: every add, fence, explicit LAC and master key is made durable here before it is
acknowledged.

Records are framed ``length u32 | crc u32 | type u8 | body`` (``length`` counts type and body, the
CRC32C covers them). **Group commit**: ``append`` only queues a record; the journal's own thread
(BookKeeper's journal thread) takes every record queued meanwhile, writes them with one ``write``
and makes them durable with ONE ``fdatasync``, then hands the whole group back to the event loop
in one call, which completes their futures. The loop never waits on the disk, and a group costs it
one wake-up, not a task, a timer and a thread-pool job. With ``journal_sync_data`` off, records
are acknowledged once written (the page cache survives a process crash, not a power cut).

**Replay** (at start) reads every file from the last checkpoint mark on. A record that is cut
short or fails its CRC at the very end of the newest file is a torn tail left by a crash: it was
never acknowledged, so it is truncated away (and logged). A bad record with valid data after it is
real corruption of acknowledged data: the bookie refuses to start and names file and offset.

**Preallocation**, as BookKeeper's ``journalPreAllocSizeMB``: a file is extended with zeros
``journal_pre_alloc_size_mb`` at a time ahead of its records, so a group's ``fdatasync`` flushes
data only. Growing the file with every group made each ``fdatasync`` commit the file system's
metadata journal too, and wait behind whatever else the disk was committing (150-200 ms at
times). Replay stops at the zeros; a file is cut back to its records when it is rolled over or
closed.

Files are ``<id as 16 hex digits>.txn``; a file is rolled over past ``journal_max_size_mb``, and
files older than the checkpoint mark are deleted by ``remove_before``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google_crc32c

from magnetar.common.latency import LatencyHistogram

log = logging.getLogger(__name__)

_FRAME = struct.Struct(">II")  # length, crc
_TYPE = struct.Struct(">B")
_LEDGER = struct.Struct(">q")
_LEDGER_LAC = struct.Struct(">qq")
SUFFIX = ".txn"

#: body: entry-log records (see entry_log.encode_record) back to back
ADD = 1
#: body: ledger id
FENCE = 2
#: body: ledger id, explicit LAC
LAC = 3
#: body: ledger id, master key (journaled before the first add or fence a bookie takes for a ledger)
KEY = 4
_TYPES = (ADD, FENCE, LAC, KEY)


class JournalError(Exception):
    """The journal could not make records durable (I/O error); nothing queued was acknowledged."""


class JournalCorruptError(Exception):
    """A journal record other than the torn tail fails its checks; acknowledged data is damaged."""


@dataclass(frozen=True, order=True)
class Mark:
    """A position in the journal: every record before it is reflected in the entry logs."""

    file_id: int
    offset: int


def encode_fence(ledger_id: int) -> bytes:
    return _LEDGER.pack(ledger_id)


def decode_fence(body: bytes) -> int:
    return int(_LEDGER.unpack(body)[0])


def encode_lac(ledger_id: int, lac: int) -> bytes:
    return _LEDGER_LAC.pack(ledger_id, lac)


def decode_lac(body: bytes) -> tuple[int, int]:
    ledger_id, lac = _LEDGER_LAC.unpack(body)
    return int(ledger_id), int(lac)


def encode_key(ledger_id: int, master_key: bytes) -> bytes:
    return _LEDGER.pack(ledger_id) + master_key


def decode_key(body: bytes) -> tuple[int, bytes]:
    return int(_LEDGER.unpack_from(body)[0]), bytes(body[_LEDGER.size :])


def frame(record_type: int, body: bytes) -> bytes:
    payload = _TYPE.pack(record_type) + body
    return _FRAME.pack(len(payload), google_crc32c.value(payload)) + payload


def journal_name(file_id: int) -> str:
    return f"{file_id:016x}{SUFFIX}"


def journal_files(directory: Path) -> dict[int, Path]:
    found: dict[int, Path] = {}
    if directory.is_dir():
        for path in directory.iterdir():
            if path.suffix == SUFFIX:
                try:
                    found[int(path.stem, 16)] = path
                except ValueError:
                    continue
    return found


# -- replay ----------------------------------------------------------------------------------------


def read_records(directory: Path, mark: Mark) -> Iterator[tuple[int, bytes]]:
    """(type, body) of every record from ``mark`` on, oldest first; truncates a torn tail.

    Blocking (file reads, truncation): iterate it in a thread.
    """
    files = journal_files(directory)
    ids = sorted(file_id for file_id in files if file_id >= mark.file_id)
    for file_id in ids:
        start = mark.offset if file_id == mark.file_id else 0
        yield from _read_file(files[file_id], start, is_last=file_id == ids[-1])


def _read_file(path: Path, start: int, *, is_last: bool) -> Iterator[tuple[int, bytes]]:
    data = path.read_bytes()
    offset = start
    while offset < len(data):
        problem, size = _check_record(data, offset)
        if problem is None:
            yield data[offset + _FRAME.size], data[offset + _FRAME.size + 1 : offset + size]
            offset += size
            continue
        if not any(data[offset:]):
            return  # preallocated space: the records end here
        # Cut short, or followed only by preallocated zeros: a write a crash interrupted.
        torn = offset + size >= len(data) or not any(data[offset + size :])
        if not (torn and is_last):
            raise JournalCorruptError(
                f"journal {path} is corrupt at offset {offset} ({problem}) with "
                f"{len(data) - offset} bytes after it; acknowledged records may be damaged, "
                f"refusing to start (move the file aside to start without it)"
            )
        log.warning(
            "journal %s: torn tail at offset %d (%s, %d bytes): never acknowledged, truncated",
            path,
            offset,
            problem,
            len(data) - offset,
        )
        with path.open("r+b") as file:
            file.truncate(offset)
            os.fsync(file.fileno())
        return


def _check_record(data: bytes, offset: int) -> tuple[str | None, int]:
    """(problem or None, record size) of the record at ``offset``."""
    if len(data) - offset < _FRAME.size:
        return "partial record header", len(data) - offset
    length, crc = _FRAME.unpack_from(data, offset)
    size = _FRAME.size + length
    if length == 0:
        return "zero length", size
    if offset + size > len(data):
        return f"record of {length} bytes cut short", size
    if google_crc32c.value(data[offset + _FRAME.size : offset + size]) != crc:
        return "CRC32C mismatch", size
    if data[offset + _FRAME.size] not in _TYPES:
        return f"unknown record type {data[offset + _FRAME.size]}", size
    return None, size


# -- writing ---------------------------------------------------------------------------------------


#: a queued record: its file id, its framed bytes, its future, when it was queued (perf_counter)
_Queued = tuple[int, bytes, asyncio.Future[None], float]


class Journal:
    def __init__(
        self,
        directory: Path,
        *,
        sync_data: bool = True,
        max_group_wait_ms: int = 2,
        buffered_writes_threshold: int = 512 * 1024,
        max_file_bytes: int = 2048 * 1024 * 1024,
        prealloc_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.directory = directory
        self._sync_data = sync_data
        self._group_wait_s = max_group_wait_ms / 1000
        self._threshold = buffered_writes_threshold
        self._max_file_bytes = max_file_bytes
        self._file_id = 0
        self._offset = 0
        # The queue is shared by the loop (append) and the journal thread (_take): both hold
        # the condition's lock for a list swap or append only.
        self._ready = threading.Condition()
        self._queue: list[_Queued] = []
        self._queued_bytes = 0
        self._closing = False
        self._stopped: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd: int | None = None
        self._fd_file_id = -1
        self._prealloc = prealloc_bytes
        #: the journal thread's place in the open file: records written, and zeros ahead of them
        self._written = 0
        self._allocated = 0
        #: fsyncs made so far (group commit: far fewer than records)
        self.fsync_count = 0
        #: records made durable so far
        self.record_count = 0
        #: a record's wait from append to durable (group wait, write, fdatasync)
        self.add_latency = LatencyHistogram()
        #: one group's write and fdatasync
        self.sync_latency = LatencyHistogram()

    def start(self, file_id: int) -> None:
        """Begin writing a new file ``file_id`` (after replay)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._file_id = file_id
        self._offset = 0
        self._loop = asyncio.get_running_loop()
        self._stopped = self._loop.create_future()
        threading.Thread(target=self._run, name="journal", daemon=True).start()

    @property
    def position(self) -> Mark:
        """Where the next record goes: every record appended so far lies before it."""
        return Mark(self._file_id, self._offset)

    def append(self, record_type: int, body: bytes) -> asyncio.Future[None]:
        """Queue a record; the future completes once it is durable (or fails with JournalError)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._closing:
            future.set_exception(JournalError("journal is closed: the bookie is shutting down"))
            return future
        data = frame(record_type, body)
        if self._offset and self._offset + len(data) > self._max_file_bytes:
            self._file_id += 1
            self._offset = 0
        self._offset += len(data)
        with self._ready:
            self._queue.append((self._file_id, data, future, time.perf_counter()))
            self._queued_bytes += len(data)
            if len(self._queue) == 1:
                self._ready.notify()
        return future

    # -- the journal thread ------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while (batch := self._take()) is not None:
                started = time.perf_counter()
                try:
                    self._write([(file_id, data) for file_id, data, _, _ in batch])
                except OSError as exc:
                    log.error("journal write failed: %s", exc)
                    self._post(self._failed, batch, exc)
                else:
                    self._post(self._durable, batch, started, time.perf_counter())
        finally:
            self._post(_settle, self._stopped)

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        """Run ``callback(*args)`` on the event loop (unless it is gone: nobody waits any more)."""
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            log.debug("journal: the event loop closed before %s", getattr(callback, "__name__", callback))

    def _take(self) -> list[_Queued] | None:
        """The next group: every record queued once one is there and the group wait is over
        (None once closing with nothing left)."""
        with self._ready:
            while not self._queue:
                if self._closing:
                    return None
                self._ready.wait()
            if self._group_wait_s and self._queued_bytes < self._threshold and not self._closing:
                # Let more adds join this group: one fsync for all of them.
                self._ready.wait(self._group_wait_s)
            batch, self._queue, self._queued_bytes = self._queue, [], 0
        return batch

    # -- back on the event loop --------------------------------------------------------------------

    def _durable(self, batch: list[_Queued], started: float, done: float) -> None:
        self.sync_latency.observe(done - started)
        self.record_count += len(batch)
        for _, _, future, queued in batch:
            self.add_latency.observe(done - queued)
            if not future.done():
                future.set_result(None)

    def _failed(self, batch: list[_Queued], exc: OSError) -> None:
        error = JournalError(f"journal write to {self.directory} failed: {exc}")
        for _, _, future, _ in batch:
            if not future.done():
                future.set_exception(error)

    def _write(self, chunks: list[tuple[int, bytes]]) -> None:
        start = 0
        while start < len(chunks):
            file_id = chunks[start][0]
            end = start
            while end < len(chunks) and chunks[end][0] == file_id:
                end += 1
            fd = self._fd_for(file_id)
            data = b"".join(data for _, data in chunks[start:end])
            self._reserve(fd, len(data))
            written = 0
            while written < len(data):
                written += os.pwrite(fd, memoryview(data)[written:], self._written + written)
            self._written += written
            start = end
        if self._sync_data and self._fd is not None:
            os.fdatasync(self._fd)
            self.fsync_count += 1

    def _reserve(self, fd: int, size: int) -> None:
        """Zeros ahead of the records, so writing them does not grow the file."""
        if self._written + size <= self._allocated:
            return
        target = max(self._allocated + self._prealloc, self._written + size)
        zeros = bytes(min(target - self._allocated, 1024 * 1024))
        while self._allocated < target:
            self._allocated += os.pwrite(fd, zeros[: target - self._allocated], self._allocated)

    def _fd_for(self, file_id: int) -> int:
        if self._fd is not None and self._fd_file_id == file_id:
            return self._fd
        if self._fd is not None:
            # Rolling over: the old file must be complete on disk before the new one exists.
            fd, self._fd = self._fd, None
            try:
                self._finish(fd)
            finally:
                os.close(fd)
        path = self.directory / journal_name(file_id)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        self._fd_file_id = file_id
        self._written = self._allocated = 0
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return self._fd

    def _finish(self, fd: int) -> None:
        """Cut the preallocated zeros off a file that takes no more records, and sync it."""
        os.ftruncate(fd, self._written)
        os.fsync(fd)

    async def remove_before(self, file_id: int) -> None:
        """Delete the journal files older than ``file_id`` (their records are checkpointed)."""
        old = [path for fid, path in journal_files(self.directory).items() if fid < file_id]
        for path in old:
            await asyncio.to_thread(path.unlink, True)
            log.info("removed journal %s: checkpointed", path)

    async def close(self) -> None:
        """Write what is queued, then stop."""
        with self._ready:
            self._closing = True
            self._ready.notify()
        if self._stopped is not None:
            await self._stopped
        if self._fd is not None:
            fd, self._fd = self._fd, None
            await asyncio.to_thread(self._finish, fd)
            os.close(fd)


def _settle(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)
