"""A managed ledger: a topic's append-only log over a list of BookKeeper ledgers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

from pydantic import BaseModel, Field

from magnetar.bookie.client import BKError, LedgerClient, LedgerHandle, NoSuchLedgerError, ReadHandle
from magnetar.broker.managed_ledger.position import Entry, InitialPosition, Position
from magnetar.common.metadata import BadVersionError, MetadataStore, NoNodeError

if TYPE_CHECKING:
    from magnetar.broker.managed_ledger.cursor import ManagedCursor

log = logging.getLogger(__name__)

ROOT = "/managed-ledgers"


class ManagedLedgerError(Exception):
    pass


class ManagedLedgerFencedError(ManagedLedgerError):
    """Another broker opened this managed ledger: this instance can no longer write."""


class ManagedLedgerConfig(BaseModel):
    """Pulsar's ``managedLedger*`` settings (snake_case, Pulsar's defaults)."""

    ensemble_size: int = Field(default=2, ge=1)
    write_quorum: int = Field(default=2, ge=1)
    ack_quorum: int = Field(default=2, ge=1)
    max_entries_per_ledger: int = Field(default=50_000, ge=1)
    min_ledger_rollover_time_minutes: float = Field(default=10, ge=0)
    max_ledger_rollover_time_minutes: float = Field(default=240, ge=0)
    max_size_per_ledger_mb: int = Field(default=2048, ge=1)
    retention_time_minutes: float = Field(default=0, ge=-1)
    retention_size_mb: float = Field(default=0, ge=-1)
    #: recent entries kept in memory for tailing readers (managedLedgerCacheSizeMB)
    cache_size_mb: int = Field(default=64, ge=0)
    #: how soon a cursor change is persisted (acks are batched this long at most)
    cursor_flush_interval_ms: int = Field(default=100, ge=0)


@dataclass
class LedgerInfo:
    ledger_id: int
    entries: int = -1  # -1: still open (being written)
    size: int = 0
    timestamp_ms: int = 0


def ledger_path(name: str) -> str:
    return f"{ROOT}/{name}"


def cursor_path(name: str, cursor: str) -> str:
    return f"{ROOT}/{name}/cursors/{quote(cursor, safe='')}"


class ManagedLedger:
    def __init__(
        self, name: str, store: MetadataStore, client: LedgerClient, config: ManagedLedgerConfig
    ) -> None:
        self.name = name
        self._store = store
        self._client = client
        self.config = config
        self._ledgers: list[LedgerInfo] = []
        self._version = -1
        self._writer: LedgerHandle | None = None
        self._writer_created = 0.0
        self._write_lock = asyncio.Lock()
        self._last_add: asyncio.Future[int] | None = None
        self._last_confirmed: Position | None = None
        self._readers: dict[int, ReadHandle] = {}
        self._cache: OrderedDict[Position, bytes] = OrderedDict()
        self._cache_bytes = 0
        self._new_entries: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.cursors: dict[str, ManagedCursor] = {}
        self._closed = False
        self._fenced = False
        self.entries_added = 0
        self.bytes_added = 0

    # -- opening --------------------------------------------------------------------------------
    async def open(self) -> None:
        from magnetar.broker.managed_ledger.cursor import ManagedCursor

        await self._load()
        for info in self._ledgers:
            if info.entries < 0:  # left open by a previous owner: fence it and learn its end
                await self._recover(info)
        empty = [i for i in self._ledgers if i.entries == 0]
        for info in empty:
            self._ledgers.remove(info)
            with contextlib.suppress(BKError):
                await self._client.delete_ledger(info.ledger_id)
        await self._start_ledger()
        last = next((i for i in reversed(self._ledgers) if i.entries > 0), None)
        if last is not None:
            self._last_confirmed = Position(last.ledger_id, last.entries - 1)
        for cursor_name in await self._cursor_names():
            cursor = ManagedCursor(self, cursor_name, durable=True)
            await cursor.load()
            self.cursors[cursor_name] = cursor

    async def _load(self) -> None:
        try:
            data, stat = await self._store.get(ledger_path(self.name))
        except NoNodeError:
            self._ledgers, self._version = [], -1
            return
        doc = json.loads(data) if data else {"ledgers": []}
        self._ledgers = [LedgerInfo(**info) for info in doc.get("ledgers", [])]
        self._version = stat.version

    async def _save(self) -> None:
        data = json.dumps({"ledgers": [asdict(i) for i in self._ledgers]}).encode()
        try:
            if self._version < 0:
                await self._store.create(ledger_path(self.name), data)
                self._version = 0
            else:
                stat = await self._store.put(ledger_path(self.name), data, expected_version=self._version)
                self._version = stat.version
        except BadVersionError as exc:
            self._fenced = True
            raise ManagedLedgerFencedError(
                f"managed ledger {self.name} was taken over by another broker"
            ) from exc

    async def _recover(self, info: LedgerInfo) -> None:
        try:
            handle = await self._client.open_ledger(info.ledger_id)
        except NoSuchLedgerError:
            info.entries = 0
            return
        info.entries = handle.last_add_confirmed + 1
        info.size = max(info.size, handle.metadata.length)
        self._readers[info.ledger_id] = handle

    async def _start_ledger(self) -> None:
        writer = await self._client.create_ledger(
            self.config.ensemble_size,
            self.config.write_quorum,
            self.config.ack_quorum,
            custom={"managed-ledger": self.name},
        )
        self._ledgers.append(LedgerInfo(writer.ledger_id, -1, 0, int(time.time() * 1000)))
        await self._save()
        self._writer, self._writer_created = writer, time.monotonic()

    async def _cursor_names(self) -> list[str]:
        from urllib.parse import unquote

        try:
            return [unquote(n) for n in await self._store.children(f"{ledger_path(self.name)}/cursors")]
        except NoNodeError:
            return []

    # -- writing --------------------------------------------------------------------------------
    async def add_entry(self, data: bytes) -> Position:
        """Append; returns once Qa bookies have the entry. Concurrent calls complete in order."""
        async with self._write_lock:
            if self._closed or self._fenced:
                raise ManagedLedgerError(f"managed ledger {self.name} is closed")
            if self._needs_roll():
                await self._roll()
            assert self._writer is not None
            writer = self._writer
            future = writer.add_entry_async(data)
            self._last_add = future
        try:
            entry_id = await future
        except BKError as exc:
            raise ManagedLedgerError(f"cannot write to {self.name}: {exc}") from exc
        position = Position(writer.ledger_id, entry_id)
        self._added(position, data)
        return position

    def _added(self, position: Position, data: bytes) -> None:
        if self._last_confirmed is None or position > self._last_confirmed:
            self._last_confirmed = position
        self.entries_added += 1
        self.bytes_added += len(data)
        info = self._ledgers[-1]
        info.size += len(data)
        self._cache_put(position, data)
        waiting, self._new_entries = self._new_entries, asyncio.get_running_loop().create_future()
        waiting.set_result(None)

    def _needs_roll(self) -> bool:
        writer = self._writer
        if writer is None:
            return True
        info = self._ledgers[-1]
        age_min = (time.monotonic() - self._writer_created) / 60
        if age_min < self.config.min_ledger_rollover_time_minutes:
            return writer.length >= self.config.max_size_per_ledger_mb * 1024 * 1024
        full = writer.last_add_confirmed + 1 >= self.config.max_entries_per_ledger
        too_big = info.size >= self.config.max_size_per_ledger_mb * 1024 * 1024
        too_old = self.config.max_ledger_rollover_time_minutes > 0 and (
            age_min >= self.config.max_ledger_rollover_time_minutes and writer.last_add_confirmed >= 0
        )
        return full or too_big or too_old

    async def _roll(self) -> None:
        """Close the current ledger (after its adds complete) and start a new one."""
        writer, self._writer = self._writer, None
        if writer is not None:
            if self._last_add is not None:
                with contextlib.suppress(BKError):
                    await asyncio.shield(self._last_add)
            metadata = await writer.close()
            info = self._ledgers[-1]
            info.entries = metadata.last_entry_id + 1
            log.info("%s: ledger %d closed at %d entries", self.name, writer.ledger_id, info.entries)
        await self._start_ledger()
        await self.trim()

    # -- reading --------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed or self._fenced

    @property
    def last_confirmed_entry(self) -> Position | None:
        return self._last_confirmed

    @property
    def number_of_entries(self) -> int:
        return sum(self._entries_of(i) for i in self._ledgers)

    @property
    def total_size(self) -> int:
        return sum(i.size for i in self._ledgers)

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return list(self._ledgers)

    def _entries_of(self, info: LedgerInfo) -> int:
        if info.entries >= 0:
            return info.entries
        if self._writer is not None and info.ledger_id == self._writer.ledger_id:
            return self._writer.last_add_confirmed + 1
        return 0

    def first_position(self) -> Position:
        """Where reading from the earliest starts (an entry, or the next one to be written)."""
        for info in self._ledgers:
            if self._entries_of(info) > 0:
                return Position(info.ledger_id, 0)
        return Position(self._ledgers[-1].ledger_id, 0)

    def before_first(self) -> Position:
        first = self.first_position()
        return Position(first.ledger_id, first.entry_id - 1)

    def valid_position(self, position: Position) -> Position:
        """The first position at or after ``position`` where an entry is, or will be written."""
        for index, info in enumerate(self._ledgers):
            if info.ledger_id < position.ledger_id:
                continue
            entries = self._entries_of(info)
            start = max(position.entry_id, 0) if info.ledger_id == position.ledger_id else 0
            if start < entries:
                return Position(info.ledger_id, start)
            if index == len(self._ledgers) - 1:
                return Position(info.ledger_id, entries)
        last = self._ledgers[-1]
        return Position(last.ledger_id, self._entries_of(last))

    def next_position(self, position: Position) -> Position:
        return self.valid_position(Position(position.ledger_id, position.entry_id + 1))

    def has_entry(self, position: Position) -> bool:
        return (
            self._last_confirmed is not None
            and position <= self._last_confirmed
            and any(
                i.ledger_id == position.ledger_id and 0 <= position.entry_id < self._entries_of(i)
                for i in self._ledgers
            )
        )

    async def read_entries(self, start: Position, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` confirmed entries from ``start`` on, across ledgers."""
        entries: list[Entry] = []
        position = self.valid_position(start)
        while len(entries) < max_entries and self.has_entry(position):
            info = next(i for i in self._ledgers if i.ledger_id == position.ledger_id)
            last = min(self._entries_of(info) - 1, position.entry_id + max_entries - len(entries) - 1)
            confirmed = self._last_confirmed
            if confirmed is not None and confirmed.ledger_id == position.ledger_id:
                # Not past what add_entry has handed back yet: those entries are in the cache,
                # the ones the writer confirmed a moment later are not (yet).
                last = min(last, confirmed.entry_id)
            entries += await self._read_range(position.ledger_id, position.entry_id, last)
            position = self.next_position(Position(position.ledger_id, last))
        return entries

    async def read_entry(self, position: Position) -> Entry | None:
        if not self.has_entry(position):
            return None
        return (await self._read_range(position.ledger_id, position.entry_id, position.entry_id))[0]

    async def _read_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        cached = [self._cache.get(Position(ledger_id, e)) for e in range(first, last + 1)]
        if all(data is not None for data in cached):
            return [Entry(Position(ledger_id, first + i), d) for i, d in enumerate(cached) if d is not None]
        try:
            if self._writer is not None and ledger_id == self._writer.ledger_id:
                raw = await self._writer.read(first, last)
            else:
                raw = await (await self._reader(ledger_id)).read(first, last)
        except BKError as exc:
            raise ManagedLedgerError(f"cannot read {self.name} {ledger_id}:{first}..{last}: {exc}") from exc
        return [Entry(Position(ledger_id, e.entry_id), e.payload) for e in raw]

    async def _reader(self, ledger_id: int) -> ReadHandle:
        handle = self._readers.get(ledger_id)
        if handle is None:
            handle = await self._client.open_ledger_no_recovery(ledger_id)
            self._readers[ledger_id] = handle
        return handle

    def _cache_put(self, position: Position, data: bytes) -> None:
        limit = self.config.cache_size_mb * 1024 * 1024
        if limit <= 0:
            return
        self._cache[position] = data
        self._cache_bytes += len(data)
        while self._cache_bytes > limit and self._cache:
            _, evicted = self._cache.popitem(last=False)
            self._cache_bytes -= len(evicted)

    def wait_for_new_entries(self) -> asyncio.Future[None]:
        return self._new_entries

    def count_entries_after(self, position: Position) -> int:
        """Confirmed entries strictly after ``position``."""
        count = 0
        for info in self._ledgers:
            entries = self._entries_of(info)
            if info.ledger_id > position.ledger_id:
                count += entries
            elif info.ledger_id == position.ledger_id:
                count += max(0, entries - position.entry_id - 1)
        return count

    async def find_first_position(self, predicate: Callable[[Entry], bool]) -> Position | None:
        """The first entry for which ``predicate`` holds, assuming it holds for every later one
        (binary search, as Pulsar's seek by publish time)."""
        positions = [(i.ledger_id, self._entries_of(i)) for i in self._ledgers if self._entries_of(i) > 0]
        total = sum(n for _, n in positions)

        def at(index: int) -> Position:
            for ledger_id, n in positions:
                if index < n:
                    return Position(ledger_id, index)
                index -= n
            raise IndexError(index)

        low, high = 0, total
        while low < high:
            middle = (low + high) // 2
            entry = await self.read_entry(at(middle))
            if entry is not None and predicate(entry):
                high = middle
            else:
                low = middle + 1
        return at(low) if low < total else None

    # -- cursors --------------------------------------------------------------------------------
    async def open_cursor(
        self, name: str, initial_position: InitialPosition = InitialPosition.LATEST
    ) -> ManagedCursor:
        from magnetar.broker.managed_ledger.cursor import ManagedCursor

        cursor = self.cursors.get(name)
        if cursor is not None:
            return cursor
        cursor = ManagedCursor(self, name, durable=True)
        if initial_position is InitialPosition.EARLIEST or self._last_confirmed is None:
            cursor.reset_to(self.before_first())
        else:
            cursor.reset_to(self._last_confirmed)
        await cursor.flush()
        self.cursors[name] = cursor
        return cursor

    def new_non_durable_cursor(self, mark_delete: Position) -> ManagedCursor:
        """A reader's cursor: everything after ``mark_delete`` is to be read; nothing persisted."""
        from magnetar.broker.managed_ledger.cursor import ManagedCursor

        cursor = ManagedCursor(self, f"reader-{id(self)}", durable=False)
        cursor.reset_to(mark_delete)
        return cursor

    async def delete_cursor(self, name: str) -> None:
        cursor = self.cursors.pop(name, None)
        if cursor is not None:
            cursor.closed = True
        with contextlib.suppress(NoNodeError):
            await self._store.delete(cursor_path(self.name, name))
        await self.trim()

    async def save_cursor(self, name: str, data: bytes) -> None:
        await self._store.put(cursor_path(self.name, name), data)

    async def load_cursor(self, name: str) -> bytes | None:
        try:
            return (await self._store.get(cursor_path(self.name, name)))[0]
        except NoNodeError:
            return None

    # -- retention ------------------------------------------------------------------------------
    async def trim(self) -> list[int]:
        """Delete closed ledgers every durable cursor has passed, as retention allows."""
        if not self.cursors:
            return []
        slowest = min(c.mark_delete_position for c in self.cursors.values())
        retention_ms = self.config.retention_time_minutes * 60_000
        deleted: list[int] = []
        for info in list(self._ledgers[:-1]):
            consumed = info.ledger_id < slowest.ledger_id or (
                info.ledger_id == slowest.ledger_id and slowest.entry_id >= info.entries - 1
            )
            if not consumed or self.config.retention_time_minutes < 0:
                break
            if retention_ms and time.time() * 1000 - info.timestamp_ms < retention_ms:
                break
            self._ledgers.remove(info)
            deleted.append(info.ledger_id)
        if deleted:
            await self._save()
            for ledger_id in deleted:
                self._readers.pop(ledger_id, None)
                with contextlib.suppress(BKError):
                    await self._client.delete_ledger(ledger_id)
            log.info("%s: deleted consumed ledgers %s", self.name, deleted)
        return deleted

    # -- closing --------------------------------------------------------------------------------
    async def close(self) -> None:
        if self._closed:
            return
        async with self._write_lock:
            self._closed = True
            for cursor in self.cursors.values():
                await cursor.flush()
            writer, self._writer = self._writer, None
            if writer is not None and not self._fenced:
                if self._last_add is not None:
                    with contextlib.suppress(BKError):
                        await asyncio.shield(self._last_add)
                with contextlib.suppress(BKError):
                    metadata = await writer.close()
                    self._ledgers[-1].entries = metadata.last_entry_id + 1
                    with contextlib.suppress(ManagedLedgerError):
                        await self._save()
        if not self._new_entries.done():
            self._new_entries.cancel()

    async def delete(self) -> None:
        """Remove the managed ledger, its ledgers and cursors."""
        await self.close()
        for info in self._ledgers:
            with contextlib.suppress(BKError):
                await self._client.delete_ledger(info.ledger_id)
        with contextlib.suppress(NoNodeError):
            await self._store.delete(ledger_path(self.name), recursive=True)
