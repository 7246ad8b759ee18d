"""Garbage collection of deleted ledgers (BookKeeper's GarbageCollectorThread, simplified).

Every ``gc_wait_time`` the ledgers this bookie stores are compared with the ledger nodes in the
metadata store; a ledger whose node ``/ledgers/L…`` is gone (checked once more, node by node,
to not race a ledger being created) is dropped from storage, and entry log files that then hold
no live ledger are deleted. Entry logs that mix live and deleted ledgers are kept whole (no
compaction yet). If ``/ledgers`` itself is missing the store is probably not the one the
ledgers were written under, and nothing is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from magnetar.bookie.layout import LEDGERS, ledger_id_from_name, ledger_path
from magnetar.bookie.ledger_storage import LedgerStorage
from magnetar.common.metadata.store import MetadataError, MetadataStore, NoNodeError

log = logging.getLogger(__name__)


class GarbageCollector:
    def __init__(self, store: MetadataStore, storage: LedgerStorage, interval_ms: int) -> None:
        self._store = store
        self._storage = storage
        self._interval_s = interval_ms / 1000
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="bookie-gc")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.collect()
            except (MetadataError, OSError) as exc:
                log.warning("garbage collection skipped: %s", exc)

    async def collect(self) -> list[int]:
        """One pass; returns the ids of the ledgers deleted from storage."""
        try:
            names = await self._store.children(LEDGERS)
        except NoNodeError:
            log.warning("no %s in the metadata store: not collecting anything", LEDGERS)
            return []
        live = {ledger_id for name in names if (ledger_id := ledger_id_from_name(name)) is not None}
        deleted: list[int] = []
        for ledger_id in self._storage.ledgers():
            if ledger_id in live or await self._store.exists(ledger_path(ledger_id)) is not None:
                continue
            removed_logs = await self._storage.delete_ledger(ledger_id)
            deleted.append(ledger_id)
            log.info(
                "ledger %d deleted from metadata: dropped (%d entry logs freed)", ledger_id, len(removed_logs)
            )
        return deleted

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
