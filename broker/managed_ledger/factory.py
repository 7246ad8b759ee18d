"""Opens managed ledgers by name, one instance per name per broker."""

from __future__ import annotations

import asyncio
import contextlib

from magnetar.bookie.client import LedgerClient
from magnetar.broker.managed_ledger.ledger import ROOT, ManagedLedger, ManagedLedgerConfig
from magnetar.common.metadata import MetadataStore, NoNodeError


class ManagedLedgerFactory:
    def __init__(
        self, store: MetadataStore, ledger_client: LedgerClient, config: ManagedLedgerConfig | None = None
    ) -> None:
        self._store = store
        self._client = ledger_client
        self.config = config or ManagedLedgerConfig()
        self._ledgers: dict[str, ManagedLedger] = {}
        self._opening: dict[str, asyncio.Task[ManagedLedger]] = {}

    async def open(self, name: str) -> ManagedLedger:
        """The managed ledger ``name`` (e.g. ``tenant/ns/persistent/topic``), created if new."""
        cached = self._ledgers.get(name)
        if cached is not None and not cached.closed:
            return cached
        self._ledgers.pop(name, None)  # closed (unloaded): open it afresh
        task = self._opening.get(name)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._open(name))
            self._opening[name] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._opening.pop(name, None)

    async def _open(self, name: str) -> ManagedLedger:
        ledger = ManagedLedger(name, self._store, self._client, self.config)
        await ledger.open()
        self._ledgers[name] = ledger
        return ledger

    def get(self, name: str) -> ManagedLedger | None:
        return self._ledgers.get(name)

    async def close_ledger(self, name: str) -> None:
        ledger = self._ledgers.pop(name, None)
        if ledger is not None:
            await ledger.close()

    async def delete(self, name: str) -> None:
        ledger = self._ledgers.pop(name, None) or await self._open(name)
        self._ledgers.pop(name, None)
        await ledger.delete()

    async def list(self, prefix: str = "") -> list[str]:
        """Names of the managed ledgers under ``prefix`` (e.g. ``tenant/ns/persistent``)."""
        base = f"{ROOT}/{prefix}".rstrip("/")
        with contextlib.suppress(NoNodeError):
            return [f"{prefix.rstrip('/')}/{child}".lstrip("/") for child in await self._store.children(base)]
        return []

    async def close(self) -> None:
        for name in list(self._ledgers):
            await self.close_ledger(name)
