"""Ledger storage: entry log + index + per-ledger state (fenced, LAC, highest entry, master key).

Everything here is in memory or buffered; durability comes from the journal (see ``bookie.py``),
and the checkpoint makes the entry logs durable so older journal files can go. The LAC of a ledger
is the max of the LAC piggybacked on its entries and any explicit LAC; long-polling readers wait
on an event that is set when the LAC moves (no busy loop).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from pathlib import Path

from magnetar.bookie.checkpoint import LedgerSnapshot
from magnetar.bookie.entry_log import EntryLog, Located, ScannedRecord, StoredEntry
from magnetar.bookie.index import Index


class NoSuchLedgerError(Exception):
    def __init__(self, ledger_id: int) -> None:
        self.ledger_id = ledger_id
        super().__init__(f"ledger {ledger_id} is not stored on this bookie")


class NoSuchEntryError(Exception):
    def __init__(self, ledger_id: int, entry_id: int) -> None:
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        super().__init__(f"entry {ledger_id}:{entry_id} is not stored on this bookie")


class LedgerState:
    __slots__ = ("fenced", "lac", "last_entry", "master_key")

    def __init__(self, fenced: bool = False, lac: int = -1, last_entry: int = -1) -> None:
        self.fenced = fenced
        self.lac = lac
        self.last_entry = last_entry
        #: recorded from the first keyed call; None for a ledger only known from its entry logs
        self.master_key: bytes | None = None


class LedgerStorage:
    def __init__(self, directories: list[Path], entry_log_size_limit: int) -> None:
        self.entry_log = EntryLog(directories, entry_log_size_limit)
        self.index = Index()
        self._states: dict[int, LedgerState] = {}
        self._lac_events: dict[int, asyncio.Event] = {}

    async def open(self) -> None:
        """Scan the entry logs and rebuild the index and per-ledger LAC / highest entry."""
        records = await asyncio.to_thread(self.entry_log.open)
        self._load(records)

    def _load(self, records: Iterable[ScannedRecord]) -> None:
        for record in records:
            self.index.put(record.ledger_id, record.entry_id, (record.log_id, record.offset, record.size))
            state = self.state(record.ledger_id)
            state.last_entry = max(state.last_entry, record.entry_id)
            state.lac = max(state.lac, record.lac)

    # -- state -----------------------------------------------------------------------------------

    def state(self, ledger_id: int) -> LedgerState:
        """The state of ``ledger_id``, created on first use (an add, a fence, an explicit LAC)."""
        state = self._states.get(ledger_id)
        if state is None:
            state = self._states[ledger_id] = LedgerState()
        return state

    def find(self, ledger_id: int) -> LedgerState | None:
        return self._states.get(ledger_id)

    def ledgers(self) -> list[int]:
        return list(self._states)

    def is_fenced(self, ledger_id: int) -> bool:
        state = self._states.get(ledger_id)
        return state is not None and state.fenced

    def fence(self, ledger_id: int) -> LedgerState:
        state = self.state(ledger_id)
        state.fenced = True
        return state

    def set_key(self, ledger_id: int, master_key: bytes) -> None:
        self.state(ledger_id).master_key = master_key

    def has_entry(self, ledger_id: int, entry_id: int) -> bool:
        return self.index.get(ledger_id, entry_id) is not None

    def set_lac(self, ledger_id: int, lac: int) -> None:
        state = self.state(ledger_id)
        if lac > state.lac:
            state.lac = lac
            self._lac_moved(ledger_id)

    def _lac_moved(self, ledger_id: int) -> None:
        event = self._lac_events.pop(ledger_id, None)
        if event is not None:
            event.set()

    async def wait_lac(self, ledger_id: int, above: int, timeout_s: float) -> int | None:
        """Wait until the LAC of ``ledger_id`` exceeds ``above``; the LAC, or None on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            state = self._states.get(ledger_id)
            if state is not None and state.lac > above:
                return state.lac
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            event = self._lac_events.get(ledger_id)
            if event is None:
                event = self._lac_events[ledger_id] = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    # -- entries ---------------------------------------------------------------------------------

    def put(self, ledger_id: int, entry_id: int, lac: int, record: bytes) -> None:
        """Store an encoded entry-log record; readable at once."""
        log_id, offset = self.entry_log.append(record)
        self.index.put(ledger_id, entry_id, (log_id, offset, len(record)))
        state = self._states.get(ledger_id)
        if state is None:
            state = self._states[ledger_id] = LedgerState()
        if entry_id > state.last_entry:
            state.last_entry = entry_id
        if lac > state.lac:
            state.lac = lac
            if ledger_id in self._lac_events:
                self._lac_moved(ledger_id)

    async def read(self, ledger_id: int, entry_id: int) -> StoredEntry:
        """The entry; NoSuchLedgerError, NoSuchEntryError or entry_log.CorruptEntryError."""
        location = self.index.get(ledger_id, entry_id)
        if location is None:
            raise self._missing(ledger_id, entry_id)
        return await self.entry_log.read(ledger_id, entry_id, *location)

    async def read_many(
        self, ledger_id: int, entry_ids: Iterable[int], max_bytes: int
    ) -> list[tuple[int, StoredEntry | Exception]]:
        """The entries named, in order, each with what ``read`` would give or raise (an exception
        in place of an entry); it stops once the stored bytes reach ``max_bytes`` (the first entry
        is read whatever its size), so the answer may cover only the first entries named."""
        # each entry id with why it cannot be served, or None: to be read from the entry log
        named: list[tuple[int, Exception | None]] = []
        wanted: list[Located] = []
        total = 0
        for entry_id in entry_ids:
            if named and total >= max_bytes:
                break
            location = self.index.get(ledger_id, entry_id)
            if location is None:
                named.append((entry_id, self._missing(ledger_id, entry_id)))
                continue
            total += location[2]
            wanted.append(Located(ledger_id, entry_id, *location))
            named.append((entry_id, None))
        read = iter(await self.entry_log.read_many(wanted))
        return [(entry_id, next(read) if failure is None else failure) for entry_id, failure in named]

    def _missing(self, ledger_id: int, entry_id: int) -> Exception:
        if ledger_id not in self._states:
            return NoSuchLedgerError(ledger_id)
        return NoSuchEntryError(ledger_id, entry_id)

    # -- checkpoint and deletion ---------------------------------------------------------------------

    def snapshot(self) -> dict[int, LedgerSnapshot]:
        """What the entry logs cannot tell on their own: fenced flag, LAC and master key."""
        return {ledger_id: (s.fenced, s.lac, s.master_key) for ledger_id, s in self._states.items()}

    def restore(self, saved: dict[int, LedgerSnapshot]) -> None:
        for ledger_id, (fenced, lac, master_key) in saved.items():
            state = self.state(ledger_id)
            state.fenced = state.fenced or fenced
            state.lac = max(state.lac, lac)
            if master_key is not None:
                state.master_key = master_key

    async def flush(self) -> None:
        await self.entry_log.flush(sync=True)

    async def delete_ledger(self, ledger_id: int) -> list[int]:
        """Forget a ledger; returns the ids of the entry logs this emptied and removed."""
        self._states.pop(ledger_id, None)
        self.index.delete_ledger(ledger_id)
        removed: list[int] = []
        for log_id in self.index.empty_logs():
            if log_id != self.entry_log.current_log_id:
                await self.entry_log.remove(log_id)
                self.index.forget_log(log_id)
                removed.append(log_id)
        return removed

    async def close(self) -> None:
        await self.entry_log.close()
