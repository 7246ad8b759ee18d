"""The managed ledger's node as its owner keeps it: the list of ledgers, where the log was
terminated and the properties, read once at the open and written back whole, by compare-and-set,
at every roll, trim, property change and close (architecture §4).

A conflict means another broker opened the managed ledger since: the owner is told through
``deposed``, which marks it fenced and makes the error it raises.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from magnetar.broker.managed_ledger import meta_store
from magnetar.broker.managed_ledger.errors import ManagedLedgerError, ManagedLedgerFencedError
from magnetar.broker.managed_ledger.meta_store import LedgerInfo, ledger_path
from magnetar.broker.managed_ledger.position import Position
from magnetar.common.metadata import (
    BadVersionError,
    MetadataError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
)

#: (why) -> the error to raise, once the owner has marked itself deposed
Deposed = Callable[[str], ManagedLedgerFencedError]


class LedgerRecord:
    def __init__(self, store: MetadataStore, name: str, deposed: Deposed) -> None:
        self._store = store
        self._name = name
        self._deposed = deposed
        self.ledgers: list[LedgerInfo] = []
        self.terminated_at: Position | None = None
        self.properties: dict[str, str] = {}
        #: one read-modify-write of the node at a time
        self.lock = asyncio.Lock()
        #: writes the node by compare-and-set, riding out answers lost to a store blip
        self._node = meta_store.NodeWriter(store, ledger_path(name))

    async def load(self) -> None:
        listed = await meta_store.load(self._store, self._name)
        self.ledgers, self.terminated_at = listed.ledgers, listed.terminated_at
        self.properties = listed.properties
        self._node.version = listed.version

    async def save(self) -> None:
        """Write the node; the caller holds the lock."""
        try:
            listed = meta_store.LedgerList(
                self.ledgers, self.terminated_at, self._node.version, self.properties
            )
            await self._node.write(meta_store.encode(listed))
        except (BadVersionError, NodeExistsError, NoNodeError) as exc:
            raise self._deposed(f"its metadata changed under it ({exc})") from exc
        except MetadataError as exc:  # the store is unreachable: a later write tries again
            raise ManagedLedgerError(f"cannot record the ledgers of {self._name}: {exc}") from exc

    async def save_locked(self) -> None:
        async with self.lock:
            await self.save()

    async def remove(self, pick: Callable[[list[LedgerInfo]], list[LedgerInfo]]) -> list[LedgerInfo]:
        """Drop the ledgers ``pick`` chooses from the list and record that; they stay listed if
        another broker took over meanwhile (a store that cannot be reached leaves them dropped
        here: the next write records it)."""
        async with self.lock:
            doomed = pick(self.ledgers)
            if not doomed:
                return []
            previous, self.ledgers = self.ledgers, [i for i in self.ledgers if i not in doomed]
            try:
                await self.save()
            except ManagedLedgerFencedError:
                self.ledgers = previous
                raise
        return doomed

    async def set_property(self, key: str, value: str) -> None:
        """Keep ``key`` = ``value``, durably before this returns (unchanged if it could not be)."""
        async with self.lock:
            previous = self.properties.get(key)
            self.properties[key] = value
            try:
                await self.save()
            except ManagedLedgerError:
                if previous is None:
                    del self.properties[key]
                else:
                    self.properties[key] = previous
                raise
