"""Opens managed ledgers by name, one instance per name per broker."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from magnetar.bookie.client import BKError, LedgerClient, LedgerHandle
from magnetar.broker.managed_ledger import meta_store
from magnetar.broker.managed_ledger.config import ManagedLedgerConfig
from magnetar.broker.managed_ledger.ledger import ManagedLedger
from magnetar.broker.managed_ledger.maintenance import MaintenanceTimer
from magnetar.broker.managed_ledger.meta_store import validate_name
from magnetar.common.background import BackgroundTasks
from magnetar.common.latency import LatencyHistogram
from magnetar.common.metadata import MetadataStore

log = logging.getLogger(__name__)

#: a prepared ledger not opened within this time is deleted (the transfer that asked for it failed)
PREPARED_TTL_S = 60.0


class ManagedLedgerFactory:
    def __init__(
        self, store: MetadataStore, ledger_client: LedgerClient, config: ManagedLedgerConfig | None = None
    ) -> None:
        self._store = store
        self._client = ledger_client
        self.config = config or ManagedLedgerConfig()
        self._ledgers: dict[str, ManagedLedger] = {}
        self._opening: dict[str, asyncio.Task[ManagedLedger]] = {}
        self._prepared: dict[str, LedgerHandle] = {}
        #: prepares under way: an open waits for its ledger rather than creating another one
        self._preparing: dict[str, asyncio.Future[None]] = {}
        self._background = BackgroundTasks()
        #: every add of this factory's ledgers: broker to Qa bookies (pulsar_storage_write_latency)
        self.write_latency = LatencyHistogram()
        #: one timer visits the open ledgers for rollover by age and retention
        self._maintenance = MaintenanceTimer(
            self.config.retention_check_interval_seconds, self._ledgers.values
        )

    async def open(self, name: str) -> ManagedLedger:
        """The managed ledger ``name`` (e.g. ``tenant/ns/persistent/topic``), created if new.

        Opening takes it over: a broker that had it open can write no more to it."""
        validate_name(name)
        cached = self._ledgers.get(name)
        if cached is not None and not cached.closed:
            return cached
        self._ledgers.pop(name, None)  # closed (unloaded) or fenced: open it afresh
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
        ledger = ManagedLedger(name, self._store, self._client, self.config, self.write_latency)
        preparing = self._preparing.get(name)
        if preparing is not None:
            await asyncio.shield(preparing)
        ledger.prepared_writer = self._prepared.pop(name, None)
        try:
            await ledger.open()
        finally:
            if ledger.prepared_writer is not None:  # the open failed before taking it
                self._discard_later(ledger.prepared_writer)
                ledger.prepared_writer = None
        self._ledgers[name] = ledger
        self._maintenance.start()
        return ledger

    async def prepare(self, name: str) -> None:
        """Create the next ledger of ``name`` before opening it: a transfer's destination does this
        while the source still writes, so the open that follows only records the ledger."""
        validate_name(name)
        cached = self._ledgers.get(name)
        busy = name in self._prepared or name in self._preparing or name in self._opening
        if busy or (cached is not None and not cached.closed):
            return
        done = asyncio.get_running_loop().create_future()
        self._preparing[name] = done
        try:
            handle = await self._client.create_ledger(
                self.config.ensemble_size,
                self.config.write_quorum,
                self.config.ack_quorum,
                custom={"managed-ledger": name},
            )
            self._prepared[name] = handle
        finally:
            del self._preparing[name]
            done.set_result(None)

        def expire() -> None:
            if self._prepared.get(name) is handle:
                del self._prepared[name]
                log.info("%s: prepared ledger %d unused, deleting it", name, handle.ledger_id)
                self._discard_later(handle)

        asyncio.get_running_loop().call_later(PREPARED_TTL_S, expire)

    def _discard_later(self, handle: LedgerHandle) -> None:
        async def discard() -> None:
            with contextlib.suppress(BKError):
                await handle.close()
            with contextlib.suppress(Exception):
                await self._client.delete_ledger(handle.ledger_id)

        self._background.spawn(discard())

    def get(self, name: str) -> ManagedLedger | None:
        """The managed ledger ``name`` if this factory has it open."""
        return self._ledgers.get(name)

    def forget(self, name: str) -> None:
        """Drop ``name`` from the open ledgers without closing it (the next open reads it afresh)."""
        self._ledgers.pop(name, None)

    async def close_ledger(self, name: str) -> None:
        ledger = self._ledgers.pop(name, None)
        if ledger is not None:
            await ledger.close()

    async def delete(self, name: str) -> None:
        """Delete the managed ledger ``name``: its ledgers, cursors and metadata."""
        ledger = self._ledgers.pop(name, None)
        if ledger is None or ledger.closed:
            ledger = await self._open(name)
            self._ledgers.pop(name, None)
        await ledger.delete()

    async def list(self, prefix: str = "") -> list[str]:
        """Names of the managed ledgers under ``prefix`` (e.g. ``tenant/ns/persistent``), sorted."""
        return await meta_store.names(self._store, prefix)

    async def close(self) -> None:
        self._maintenance.stop()
        for name in list(self._ledgers):
            await self.close_ledger(name)
