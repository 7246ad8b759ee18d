"""The read handles of a managed ledger's ledgers: opened without recovery at the first read of a
ledger (or kept from its recovery) and dropped when the ledger leaves the log. Both the owner and
a read-only owner (architecture §5, PIP-63) read closed ledgers, and the tail they do not write,
through these."""

from __future__ import annotations

from magnetar.bookie.client import BKError, LedgerClient, ReadHandle
from magnetar.broker.managed_ledger.errors import ManagedLedgerError
from magnetar.broker.managed_ledger.position import Entry, Position


class LedgerReaders:
    def __init__(self, client: LedgerClient, name: str) -> None:
        self._client = client
        self._name = name
        self._handles: dict[int, ReadHandle] = {}

    def get(self, ledger_id: int) -> ReadHandle | None:
        """The handle of ``ledger_id`` if it is open."""
        return self._handles.get(ledger_id)

    def ledger_ids(self) -> list[int]:
        return list(self._handles)

    def keep(self, ledger_id: int, handle: ReadHandle) -> None:
        """Read ``ledger_id`` through ``handle`` (one recovery opened, say)."""
        self._handles[ledger_id] = handle

    async def open(self, ledger_id: int) -> ReadHandle:
        """The handle of ``ledger_id``, opened without recovery unless it is open already."""
        handle = self._handles.get(ledger_id)
        if handle is None:
            handle = await self._client.open_ledger_no_recovery(ledger_id)
            self._handles[ledger_id] = handle
        return handle

    def forget(self, ledger_id: int) -> None:
        self._handles.pop(ledger_id, None)

    async def read(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        """Entries ``first``..``last`` of ``ledger_id`` from its bookies."""
        try:
            raw = await (await self.open(ledger_id)).read(first, last)
        except BKError as exc:
            raise ManagedLedgerError(f"cannot read {self._name} {ledger_id}:{first}..{last}: {exc}") from exc
        return [Entry(Position(ledger_id, e.entry_id), e.payload) for e in raw]
