"""A managed ledger's durable cursors (architecture §4, "Managed ledgers and cursors"): loaded from
their nodes and cursor ledgers at the open (and so taken over from a previous owner), created
when a subscription first asks, persisted one last time at the close and deleted with their node
and ledger."""

from __future__ import annotations

import asyncio
import logging
import weakref

from magnetar.bookie.client import LedgerClient
from magnetar.broker.managed_ledger import meta_store
from magnetar.broker.managed_ledger.cursor import CursorLedger, ManagedCursor
from magnetar.broker.managed_ledger.cursor_ledger import LedgerCursorStorage
from magnetar.broker.managed_ledger.errors import ManagedLedgerClosedError, ManagedLedgerError
from magnetar.broker.managed_ledger.position import InitialPosition
from magnetar.common.metadata import MetadataStore

log = logging.getLogger(__name__)


class DurableCursors:
    def __init__(self, ledger: CursorLedger, store: MetadataStore, client: LedgerClient) -> None:
        # Weakly: the managed ledger holds these cursors, and is used only while it is alive.
        # Held strongly, each would keep the other in a cycle that only a full collection frees.
        self._ledger_ref = weakref.ref(ledger)
        self._name = ledger.name
        self._store = store
        self._client = client
        #: closed with the managed ledger (no cursor is created then)
        self._closed = False
        #: let go of (``release``)
        self.released = False
        self.by_name: dict[str, ManagedCursor] = {}
        #: a cursor is opened or deleted once, not twice at the same time
        self._lock = asyncio.Lock()

    @property
    def _ledger(self) -> CursorLedger:
        ledger = self._ledger_ref()
        if ledger is None:
            raise ManagedLedgerClosedError(f"managed ledger {self._name} is closed")
        return ledger

    def _storage(self, name: str) -> LedgerCursorStorage:
        ledger = self._ledger
        return LedgerCursorStorage(self._store, self._client, ledger.name, name, ledger.config, ledger.fenced)

    async def load(self) -> None:
        """Every cursor the store holds for the managed ledger, taken over."""
        for name in await meta_store.cursor_names(self._store, self._name):
            cursor = ManagedCursor(self._ledger, name, durable=True, storage=self._storage(name))
            await cursor.load()
            self.by_name[name] = cursor

    async def open(self, name: str, initial_position: InitialPosition) -> ManagedCursor:
        """The cursor ``name``; a new one starts at ``initial_position``, an existing one where it
        was left (also after a restart)."""
        if not isinstance(name, str) or not name:
            raise ManagedLedgerError(f"invalid cursor name {name!r}")
        async with self._lock:
            cursor = self.by_name.get(name)
            if cursor is not None:
                return cursor
            if self._closed or self._ledger.is_fenced:
                raise ManagedLedgerClosedError(f"managed ledger {self._name} is closed")
            initial = InitialPosition(initial_position)
            cursor = await ManagedCursor.create_durable(self._ledger, name, initial, self._storage(name))
            self.by_name[name] = cursor
            return cursor

    async def delete(self, name: str) -> None:
        """Forget the cursor ``name`` and delete its node and its ledger."""
        async with self._lock:
            cursor = self.by_name.pop(name, None)
            if cursor is not None:
                await cursor.close(flush=False)
            storage = cursor.storage if cursor is not None else None
            await (storage or self._storage(name)).delete()

    async def delete_all(self) -> None:
        """Every cursor's node and ledger (the managed ledger is being deleted): the ledgers are
        named only in the nodes, so they are deleted first."""
        names = set(self.by_name) | set(await meta_store.cursor_names(self._store, self._name))
        for name in sorted(names):
            await self.delete(name)

    async def close(self) -> None:
        """Persist every cursor one last time; one that cannot be is left to what it last wrote."""
        self._closed = True
        for cursor in list(self.by_name.values()):
            try:
                await cursor.close()
            except ManagedLedgerError as exc:
                log.warning("%s: cursor %s not persisted at close: %s", self._name, cursor.name, exc)

    def release(self) -> None:
        """Let go of the cursors, once the managed ledger is closed and its work is done: each
        holds the managed ledger, which would otherwise wait in a cycle for a full collection.
        The managed ledger trims nothing after this (with no cursors, everything looks consumed)."""
        self.released = True
        self.by_name.clear()
