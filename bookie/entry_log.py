"""Append-only entry log files: where entries live once they are out of the journal.

Every record is self-describing, so the index can be rebuilt by scanning the files::

    crc u32 | length u32 | ledger i64 | entry i64 | lac i64 | digest u32 | payload

``crc`` is a CRC32C of the 32 header bytes after it (length .. digest), so a scan can tell a
damaged header from a real one; the payload is covered by the client's digest, which the log
re-verifies on every read (architecture §4: a corrupt entry is reported, never served). ``length``
counts the bytes after the length field.

Appends go to an in-memory buffer and reach the file in large writes made in a thread; reads of
bytes not yet written are served from memory. Files are named ``<id as 16 hex digits>.log``
and spread over the ledger directories round-robin. A new file is started at every open, so a
torn tail left by a crash is never appended to (the journal covers whatever it lost).
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import google_crc32c

from magnetar.bookie.digest import verify

log = logging.getLogger(__name__)

_CRC = struct.Struct(">I")
_HEADER = struct.Struct(">IqqqI")  # length, ledger, entry, lac, digest
HEADER_SIZE = _CRC.size + _HEADER.size  # 36
#: length field value of a record with an empty payload
_MIN_LENGTH = _HEADER.size - 4
SUFFIX = ".log"
#: buffered appends are written out once this many bytes wait in memory
WRITE_CHUNK = 1024 * 1024


class CorruptEntryError(Exception):
    """Stored bytes of an entry fail their checksum; the message names ledger, entry and file."""


@dataclass(frozen=True, slots=True)
class ScannedRecord:
    log_id: int
    offset: int
    size: int
    ledger_id: int
    entry_id: int
    lac: int


@dataclass(frozen=True, slots=True)
class Located:
    """Where one entry's record is: what a batch read asks the log for."""

    ledger_id: int
    entry_id: int
    log_id: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class StoredEntry:
    ledger_id: int
    entry_id: int
    lac: int
    digest: int
    payload: bytes


def encode_record(ledger_id: int, entry_id: int, lac: int, digest: int, payload: bytes) -> bytes:
    header = _HEADER.pack(_MIN_LENGTH + len(payload), ledger_id, entry_id, lac, digest)
    return _CRC.pack(google_crc32c.value(header)) + header + payload


def decode_record(record: bytes | memoryview) -> StoredEntry | None:
    """The entry in ``record``, or None when its header is damaged or truncated."""
    if len(record) < HEADER_SIZE:
        return None
    (crc,) = _CRC.unpack_from(record, 0)
    header = bytes(record[_CRC.size : HEADER_SIZE])
    if google_crc32c.value(header) != crc:
        return None
    length, ledger_id, entry_id, lac, digest = _HEADER.unpack(header)
    if len(record) != _CRC.size + 4 + length:
        return None
    return StoredEntry(ledger_id, entry_id, lac, digest, bytes(record[HEADER_SIZE:]))


def iter_records(data: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """(offset, size) of each well-framed record in ``data``; stops at the first bad header."""
    offset = 0
    end = len(data)
    while offset + HEADER_SIZE <= end:
        (crc,) = _CRC.unpack_from(data, offset)
        header = bytes(data[offset + _CRC.size : offset + HEADER_SIZE])
        if google_crc32c.value(header) != crc:
            return
        size = _CRC.size + 4 + int.from_bytes(header[:4], "big")
        if offset + size > end:
            return
        yield offset, size
        offset += size


def log_name(log_id: int) -> str:
    return f"{log_id:016x}{SUFFIX}"


def _log_id(path: Path) -> int | None:
    try:
        return int(path.stem, 16) if path.suffix == SUFFIX else None
    except ValueError:
        return None


@dataclass(slots=True)
class _Buffer:
    log_id: int
    start: int  # file offset of data[0]
    data: bytearray


class EntryLog:
    def __init__(self, directories: list[Path], size_limit: int) -> None:
        self._dirs = directories
        self._size_limit = size_limit
        self._paths: dict[int, Path] = {}
        self._read_fds: dict[int, int] = {}
        self._current = -1
        self._offset = 0
        self._pending: list[_Buffer] = []  # appended, not yet handed to the writer
        self._flushing: list[_Buffer] = []  # being written by the writer thread
        self._write_lock = asyncio.Lock()
        self._write_fds: dict[int, int] = {}
        self._flush_task: asyncio.Task[None] | None = None

    # -- start -----------------------------------------------------------------------------------

    def open(self) -> list[ScannedRecord]:
        """Find the existing logs, scan them, and start a new one. Blocking: call in a thread."""
        for directory in self._dirs:
            directory.mkdir(parents=True, exist_ok=True)
            for path in directory.iterdir():
                log_id = _log_id(path)
                if log_id is not None:
                    self._paths[log_id] = path
        records: list[ScannedRecord] = []
        for log_id in sorted(self._paths):
            records.extend(self._scan(log_id))
        self._start_log(max(self._paths, default=-1) + 1)
        return records

    def _scan(self, log_id: int) -> Iterator[ScannedRecord]:
        path = self._paths[log_id]
        data = path.read_bytes()
        end = 0
        for offset, size in iter_records(data):
            ledger_id, entry_id, lac = struct.unpack_from(">qqq", data, offset + 8)
            yield ScannedRecord(log_id, offset, size, ledger_id, entry_id, lac)
            end = offset + size
        if end != len(data):
            # A crash mid-write leaves a torn tail; anything after it that was acknowledged is
            # still in the journal past the last checkpoint and is replayed into a new log.
            log.warning(
                "entry log %s: %d bytes after offset %d are not a valid record; ignored",
                path,
                len(data) - end,
                end,
            )

    @property
    def log_ids(self) -> list[int]:
        return sorted(self._paths)

    @property
    def current_log_id(self) -> int:
        return self._current

    def _start_log(self, log_id: int) -> None:
        directory = self._dirs[log_id % len(self._dirs)]
        self._paths[log_id] = directory / log_name(log_id)
        self._current = log_id
        self._offset = 0

    # -- writes ----------------------------------------------------------------------------------

    def append(self, record: bytes) -> tuple[int, int]:
        """Buffer ``record``; returns (log id, offset). The bytes are readable at once."""
        if self._offset and self._offset + len(record) > self._size_limit:
            self._start_log(self._current + 1)
        buffer = self._pending[-1] if self._pending else None
        if buffer is None or buffer.log_id != self._current:
            buffer = _Buffer(self._current, self._offset, bytearray())
            self._pending.append(buffer)
        offset = self._offset
        buffer.data += record
        self._offset += len(record)
        if len(buffer.data) >= WRITE_CHUNK and (self._flush_task is None or self._flush_task.done()):
            self._flush_task = asyncio.get_running_loop().create_task(self.flush(sync=False))
        return self._current, offset

    async def flush(self, *, sync: bool) -> None:
        """Write every buffered byte to its file (and fsync with ``sync``)."""
        async with self._write_lock:
            self._flushing, self._pending = self._pending, []
            try:
                await asyncio.to_thread(self._write, self._flushing, sync, self._current)
            finally:
                self._flushing = []

    def _write(self, buffers: list[_Buffer], sync: bool, current: int) -> None:
        for buffer in buffers:
            fd = self._write_fd(buffer.log_id)
            os.pwrite(fd, buffer.data, buffer.start)
        for log_id, fd in list(self._write_fds.items()):
            if sync or log_id != current:
                os.fdatasync(fd)
            if log_id != current:  # rolled over: finished for good
                os.close(fd)
                del self._write_fds[log_id]

    def _write_fd(self, log_id: int) -> int:
        fd = self._write_fds.get(log_id)
        if fd is None:
            path = self._paths[log_id]
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            _fsync_dir(path.parent)  # the new file's name must survive a crash too
            self._write_fds[log_id] = fd
        return fd

    # -- reads -----------------------------------------------------------------------------------

    async def read(self, ledger_id: int, entry_id: int, log_id: int, offset: int, size: int) -> StoredEntry:
        """The entry at (log, offset); raises CorruptEntryError when its bytes fail a check."""
        record = self._from_memory(log_id, offset, size)
        if record is None:
            record = await asyncio.to_thread(self._pread, log_id, offset, size)
        return self._checked(record, ledger_id, entry_id, log_id, offset)

    async def read_many(self, wanted: list[Located]) -> list[StoredEntry | CorruptEntryError]:
        """The entries at their locations, in order: one thread hop for all the file reads (a
        wake-up costs more than a small pread), and a CorruptEntryError in place of each entry
        whose bytes fail a check."""
        in_memory = [self._from_memory(w.log_id, w.offset, w.size) for w in wanted]
        on_disk = [w for w, record in zip(wanted, in_memory, strict=True) if record is None]
        from_disk = iter(
            await asyncio.to_thread(lambda: [self._pread(w.log_id, w.offset, w.size) for w in on_disk])
            if on_disk
            else ()
        )
        found: list[StoredEntry | CorruptEntryError] = []
        for w, record in zip(wanted, in_memory, strict=True):
            try:
                found.append(
                    self._checked(
                        next(from_disk) if record is None else record,
                        w.ledger_id,
                        w.entry_id,
                        w.log_id,
                        w.offset,
                    )
                )
            except CorruptEntryError as exc:
                found.append(exc)
        return found

    @staticmethod
    def _checked(record: bytes, ledger_id: int, entry_id: int, log_id: int, offset: int) -> StoredEntry:
        entry = decode_record(record)
        where = f"entry log {log_name(log_id)} offset {offset}"
        if entry is None or (entry.ledger_id, entry.entry_id) != (ledger_id, entry_id):
            raise CorruptEntryError(f"entry {ledger_id}:{entry_id}: damaged record header in {where}")
        if not verify(ledger_id, entry_id, entry.lac, entry.payload, entry.digest):
            raise CorruptEntryError(f"entry {ledger_id}:{entry_id}: payload fails its CRC32C in {where}")
        return entry

    def _from_memory(self, log_id: int, offset: int, size: int) -> bytes | None:
        for buffer in (*self._pending, *self._flushing):
            start = offset - buffer.start
            if buffer.log_id == log_id and 0 <= start < len(buffer.data):
                return bytes(buffer.data[start : start + size])
        return None

    def _pread(self, log_id: int, offset: int, size: int) -> bytes:
        fd = self._read_fds.get(log_id)
        if fd is None:
            fd = os.open(self._paths[log_id], os.O_RDONLY)
            self._read_fds[log_id] = fd
        return os.pread(fd, size, offset)

    # -- removal and shutdown --------------------------------------------------------------------

    async def remove(self, log_id: int) -> None:
        """Delete a finished log file (every ledger in it is gone)."""
        if log_id == self._current:
            raise ValueError(f"entry log {log_name(log_id)} is the one being written")
        await self.flush(sync=False)  # no buffered bytes may recreate the file afterwards
        path = self._paths.pop(log_id, None)
        fd = self._read_fds.pop(log_id, None)
        if fd is not None:
            os.close(fd)
        if path is not None:
            await asyncio.to_thread(path.unlink, True)
            log.info("removed entry log %s: every ledger in it was deleted", path)

    async def close(self) -> None:
        if self._flush_task is not None:
            await asyncio.gather(self._flush_task, return_exceptions=True)
        await self.flush(sync=True)
        for fd in (*self._read_fds.values(), *self._write_fds.values()):
            os.close(fd)
        self._read_fds.clear()
        self._write_fds.clear()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
