"""A topic ledger as a read-only owner sees it: the writable owner's ledgers, tailed.

Nothing is fenced or recovered: ledgers are opened without recovery and read up to their LAC.
When a cursor has read everything known and waits for more, the LAC of the ledger being written
is long-polled from its bookies (the writable owner advances it explicitly when its traffic
pauses, ``bookkeeper_explicit_lac_interval_in_mills``). A ledger roll (or a writable owner
that moved and started a new ledger) is noticed either by re-reading the managed-ledger metadata
whenever a long-poll interval passes without the LAC moving (``poll``, PIP-63 option C) or by a
metadata-store watch on it (``watch``, option A). Durable cursors are ``RemoteCursor`` caches of
the writable owner's; readers' cursors are local as anywhere. Entries read are cached, so the
subscriptions of one read-only owner read each entry from the bookies once.

It is no ``ManagedLedger``: it reads the same metadata (``meta_store``) and ledgers (through
``LedgerReaders``) and works out positions the same way (``Span``, ``reads``), but owns nothing
it could write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from magnetar.bookie.client import BKError, LedgerClient
from magnetar.broker.managed_ledger import (
    Entry,
    InitialPosition,
    ManagedCursor,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    Position,
    meta_store,
    reads,
)
from magnetar.broker.managed_ledger.entry_cache import EntryCache
from magnetar.broker.managed_ledger.ledger_readers import LedgerReaders
from magnetar.broker.managed_ledger.meta_store import LedgerInfo, LedgerList, ledger_path, validate_name
from magnetar.broker.managed_ledger.new_entries import NewEntries
from magnetar.broker.managed_ledger.span import Span
from magnetar.broker.managed_ledger.topic_ledger import AddCallback
from magnetar.broker.read_only.cursor import RemoteCursor
from magnetar.broker.read_only.cursor_client import CursorClient
from magnetar.common.metadata import MetadataStore, WatchEvent

log = logging.getLogger(__name__)

MB = 1024 * 1024


class ReadOnlyManagedLedgerError(ManagedLedgerError):
    """A write asked of a read-only owner."""


class ReadOnlyManagedLedger:
    def __init__(
        self,
        name: str,
        store: MetadataStore,
        client: LedgerClient,
        config: ManagedLedgerConfig,
        *,
        topic: str,
        cursors: CursorClient | None,
        poll_interval_s: float = 1.0,
        watch: bool = False,
    ) -> None:
        self.name = validate_name(name)
        self.config = config
        self._store = store
        self.topic = topic
        self._rpc = cursors
        self._poll_interval_s = poll_interval_s
        self._watch = watch
        #: set while a cursor waits for entries past the known LAC
        self._demand = asyncio.Event()
        #: set by the metadata watch (``watch`` mode)
        self._metadata_changed = asyncio.Event()
        self._tail_task: asyncio.Task[None] | None = None
        #: how many times the metadata was re-read (tests and stats)
        self.metadata_refreshes = 0
        #: entries being read from the bookies, for other subscriptions asking for them meanwhile
        self._inflight: dict[Position, asyncio.Future[bytes]] = {}
        #: the managed ledger's node as last read (the writable owner's ledgers and properties)
        self._listed = LedgerList([], None, -1)
        self._refresh_lock = asyncio.Lock()  # one re-read of the node at a time
        self._readers = LedgerReaders(client, self.name)
        self._cache = EntryCache(config.cache_size_mb * MB)
        self._last_confirmed: Position | None = None
        self._new_entries = NewEntries()
        self._cursor_lock = asyncio.Lock()
        #: the subscriptions' cursors, cached from the writable owner
        self.cursors: dict[str, ManagedCursor] = {}
        self._closed = False
        #: nothing is added here (stats read zero, as they did for a read-only owner)
        self.entries_added = 0
        self.bytes_added = 0

    # -- opening and following ------------------------------------------------------------------
    async def open(self) -> None:
        """Read the metadata and open the ledgers without recovery; start tailing."""
        await self._refresh()
        log.info(
            "%s: following the writable owner read-only (ledgers %s, last entry %s)",
            self.name,
            [i.ledger_id for i in self._listed.ledgers],
            self._last_confirmed,
        )
        if self._watch:
            self._store.watch(ledger_path(self.name), self._on_metadata_event)
        self._tail_task = asyncio.get_running_loop().create_task(self._tail(), name=f"tail-{self.name}")

    def _on_metadata_event(self, _event: WatchEvent) -> None:
        self._metadata_changed.set()

    async def _refresh(self) -> None:
        """Re-read the managed-ledger metadata: new ledgers (rolls), closed ones, trimmed ones."""
        async with self._refresh_lock:
            self.metadata_refreshes += 1
            self._listed = await meta_store.load(self._store, self.name)
            listed = {i.ledger_id for i in self._listed.ledgers}
            for ledger_id in [i for i in self._readers.ledger_ids() if i not in listed]:
                self._readers.forget(ledger_id)
                self._cache.forget_ledger(ledger_id)
            for info in self._listed.ledgers:
                handle = self._readers.get(info.ledger_id)
                try:
                    if handle is None and info.entries != 0:
                        await self._readers.open(info.ledger_id)
                    elif handle is not None and info.entries >= 0 and not handle.is_closed:
                        await handle.refresh_metadata()  # closed by the writer: read to its end
                except BKError as exc:
                    raise ManagedLedgerError(
                        f"cannot open ledger {info.ledger_id} of {self.name}: {exc}"
                    ) from exc
        self._advance()

    def _entries_of(self, info: LedgerInfo) -> int:
        if info.entries >= 0:
            return info.entries
        handle = self._readers.get(info.ledger_id)
        return handle.last_add_confirmed + 1 if handle is not None else 0

    def _advance(self) -> None:
        """Move the last confirmed entry to what the ledgers now show; wake waiting cursors."""
        last = next(
            (
                Position(i.ledger_id, self._entries_of(i) - 1)
                for i in reversed(self._listed.ledgers)
                if self._entries_of(i) > 0
            ),
            None,
        )
        if last is None or (self._last_confirmed is not None and last <= self._last_confirmed):
            return
        self._last_confirmed = last
        self._demand.clear()
        self._new_entries.notify()

    def wait_for_new_entries(self) -> asyncio.Future[None]:
        """A future that resolves once more entries are readable; cancelled at the close."""
        waiter = self._new_entries.wait(closed=self._closed)
        self._demand.set()  # a cursor asks past the known LAC: start long-polling it
        return waiter

    def _open_tail(self) -> LedgerInfo | None:
        tail = self._listed.ledgers[-1] if self._listed.ledgers else None
        return tail if tail is not None and tail.entries < 0 else None

    async def _tail(self) -> None:
        while not self._closed:
            await self._demand.wait()
            try:
                moved = await self._follow_once()
                if self._watch:
                    if self._metadata_changed.is_set():
                        self._metadata_changed.clear()
                        await self._refresh()
                elif not moved:
                    await self._refresh()  # the LAC stood still for an interval: a roll?
            except ManagedLedgerError as exc:
                log.warning("%s: following the writable owner failed: %s", self.name, exc)
                await asyncio.sleep(self._poll_interval_s)
            except Exception:
                log.exception("%s: tailing failed; retrying", self.name)
                await asyncio.sleep(self._poll_interval_s)

    async def _follow_once(self) -> bool:
        """Long-poll the LAC of the ledger being written (or wait an interval when there is
        none, or for the watch); True when new entries became readable."""
        tail = self._open_tail()
        handle = self._readers.get(tail.ledger_id) if tail is not None else None
        if handle is None:
            if self._watch:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._metadata_changed.wait(), self._poll_interval_s)
            else:
                await asyncio.sleep(self._poll_interval_s)
            return False
        before = handle.last_add_confirmed
        if self._watch:
            poll = asyncio.ensure_future(handle.wait_for_lac(before, self._poll_interval_s))
            changed = asyncio.ensure_future(self._metadata_changed.wait())
            try:
                await asyncio.wait([poll, changed], return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                if not poll.done():
                    poll.cancel()
            with contextlib.suppress(asyncio.CancelledError, BKError):
                if poll.done():
                    poll.result()
        else:
            try:
                await handle.wait_for_lac(before, self._poll_interval_s)
            except BKError as exc:
                raise ManagedLedgerError(
                    f"cannot read the LAC of ledger {tail.ledger_id if tail else '?'}: {exc}"
                ) from exc
        if handle.last_add_confirmed > before:
            self._advance()
            return True
        return False

    # -- state ----------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def is_fenced(self) -> bool:
        return False  # a read-only owner is never taken over: it writes nothing

    def fenced(self, why: str) -> ManagedLedgerFencedError:
        """Never asked: only a durable cursor's own write asks, and the writable owner writes."""
        return ManagedLedgerFencedError(f"{self.name} is owned read-only here ({why})")

    @property
    def is_terminated(self) -> bool:
        return self._listed.terminated_at is not None

    @property
    def last_confirmed_entry(self) -> Position | None:
        return self._last_confirmed

    @property
    def number_of_entries(self) -> int:
        return sum(self._entries_of(i) for i in self._listed.ledgers)

    @property
    def total_size(self) -> int:
        return sum(i.size for i in self._listed.ledgers)

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return list(self._listed.ledgers)

    @property
    def properties(self) -> dict[str, str]:
        """The writable owner's, as last read."""
        return dict(self._listed.properties)

    # -- positions (span.py) --------------------------------------------------------------------
    def _span(self) -> Span:
        return Span(self._listed.ledgers, self._entries_of, self._last_confirmed)

    def first_position(self) -> Position:
        return self._span().first_position()

    def before_first(self) -> Position:
        return self._span().before_first()

    def valid_position(self, position: Position) -> Position:
        return self._span().valid_position(position)

    def next_position(self, position: Position) -> Position:
        return self._span().next_position(position)

    def previous_position(self, position: Position) -> Position | None:
        return self._span().previous_position(position)

    def has_entry(self, position: Position) -> bool:
        return self._span().has_entry(position)

    def count_entries_after(self, position: Position) -> int:
        return self._span().count_entries_after(position)

    def count_entries_between(self, first: Position, last: Position) -> int:
        return self._span().count_entries_between(first, last)

    # -- reading --------------------------------------------------------------------------------
    async def read_entries(
        self, start: Position, max_entries: int, max_bytes: int | None = None
    ) -> list[Entry]:
        return await reads.read_entries(self._span(), self._read_range, start, max_entries, max_bytes)

    async def read_entry(self, position: Position) -> Entry | None:
        return await reads.read_entry(self._span(), self._read_range, position)

    async def read_positions(self, positions: list[Position]) -> list[Entry]:
        return await reads.read_positions(self._span(), self._read_range, positions)

    async def find_first_position(self, predicate: Callable[[Entry], bool]) -> Position | None:
        return await reads.find_first(self._span(), self._read_range, predicate)

    async def _read_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        """Entries from the cache, else from the bookies; an entry another subscription is
        already reading is waited for, not read again (the subscriptions of a read-only owner
        read the same entries at about the same time, which is its whole point)."""
        wanted = [Position(ledger_id, e) for e in range(first, last + 1)]
        found: dict[Position, bytes] = {}
        waiting: dict[Position, asyncio.Future[bytes]] = {}
        mine: dict[Position, asyncio.Future[bytes]] = {}
        loop = asyncio.get_running_loop()
        for position in wanted:
            data = self._cache.get(position)
            if data is not None:
                found[position] = data
            elif position in self._inflight:
                waiting[position] = self._inflight[position]
            else:
                mine[position] = self._inflight[position] = loop.create_future()
        try:
            for start, end in _runs(sorted(mine)):
                for entry in await self._from_bookies(ledger_id, start.entry_id, end.entry_id):
                    self._cache.put(entry.position, entry.data)
                    found[entry.position] = entry.data
                    future = mine.get(entry.position)
                    if future is not None and not future.done():
                        future.set_result(entry.data)
        except BaseException as exc:
            for future in mine.values():
                if not future.done():
                    future.set_exception(ManagedLedgerError(f"reading {self.name} failed: {exc}"))
                    future.exception()  # retrieved: a reader waiting on it gets it, nobody else
            raise
        finally:
            for position in mine:
                self._inflight.pop(position, None)
        for position, future in waiting.items():
            found[position] = await asyncio.shield(future)
        return [Entry(p, found[p]) for p in wanted if p in found]

    async def _from_bookies(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        cached = self._cache.get_range(ledger_id, first, last)
        if all(data is not None for data in cached):
            return [Entry(Position(ledger_id, first + i), d) for i, d in enumerate(cached) if d is not None]
        return await self._readers.read(ledger_id, first, last)

    # -- cursors (forwarded to the writable owner) ----------------------------------------------
    async def open_cursor(
        self, name: str, initial_position: InitialPosition = InitialPosition.LATEST
    ) -> ManagedCursor:
        if not isinstance(name, str) or not name:
            raise ManagedLedgerError(f"invalid cursor name {name!r}")
        if self._rpc is None:
            raise ReadOnlyManagedLedgerError(f"{self.name}: durable cursors need the writable owner's RPCs")
        async with self._cursor_lock:
            earliest = InitialPosition(initial_position) is InitialPosition.EARLIEST
            state = await self._rpc.subscribe(self.topic, name, earliest=earliest)
            cursor = self.cursors.get(name)
            if not isinstance(cursor, RemoteCursor):
                cursor = RemoteCursor(self, name, self._rpc, self.topic)
                self.cursors[name] = cursor
            cursor.apply(state)
            return cursor

    def new_non_durable_cursor(
        self, start: Position | InitialPosition, *, inclusive: bool = True
    ) -> ManagedCursor:
        """A reader's cursor: local, as on any broker."""
        return ManagedCursor.reader(self, start, inclusive=inclusive)

    async def delete_cursor(self, name: str) -> None:
        if self._rpc is None:
            raise ReadOnlyManagedLedgerError(f"{self.name}: durable cursors need the writable owner's RPCs")
        async with self._cursor_lock:
            await self._rpc.unsubscribe(self.topic, name)
            cursor = self.cursors.pop(name, None)
            if cursor is not None:
                await cursor.close(flush=False)

    # -- what a read-only owner never does ------------------------------------------------------
    async def add_entry(self, data: bytes) -> Position:
        raise self._no_writes()

    def add_entry_then(self, data: bytes, done: AddCallback) -> None:
        asyncio.get_running_loop().call_soon(done, None, self._no_writes())

    def _no_writes(self) -> ReadOnlyManagedLedgerError:
        return ReadOnlyManagedLedgerError(
            f"{self.name} is owned read-only here: produce to its writable owner"
        )

    def cursor_moved_to_ledger(self) -> None:
        return

    async def terminate(self) -> Position | None:
        raise ReadOnlyManagedLedgerError(f"{self.name} is owned read-only here")

    async def delete(self) -> None:
        raise ReadOnlyManagedLedgerError(f"{self.name} is owned read-only here")

    async def set_property(self, key: str, value: str) -> None:
        raise ReadOnlyManagedLedgerError(f"{self.name} is owned read-only here")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watch:
            self._store.unwatch(ledger_path(self.name), self._on_metadata_event)
        if self._tail_task is not None:
            self._tail_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._tail_task
        for cursor in list(self.cursors.values()):
            await cursor.close(flush=False)
        self._new_entries.cancel_all()


def _runs(positions: list[Position]) -> list[tuple[Position, Position]]:
    """Contiguous runs (first, last) of sorted positions of one ledger."""
    runs: list[tuple[Position, Position]] = []
    for position in positions:
        if runs and position.entry_id == runs[-1][1].entry_id + 1:
            runs[-1] = (runs[-1][0], position)
        else:
            runs.append((position, position))
    return runs
