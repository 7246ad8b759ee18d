"""Auto-recovery as it runs inside a bookie: an auditor candidate and a replication worker."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from magnetar.bookie.autorecovery.auditor import Auditor, AuditorSettings
from magnetar.bookie.autorecovery.replication_worker import ReplicationWorker, WorkerSettings
from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.bookie.config import BookieConfig
from magnetar.common.metadata import MetadataStore

log = logging.getLogger(__name__)


class AutoRecovery:
    def __init__(self, store: MetadataStore, identity: str, config: BookieConfig) -> None:
        # The bookie's own certificate is auto-recovery's client certificate: bookies that
        # require one accept their peers' re-replication reads and writes.
        self.client = LedgerClient(store, LedgerClientConfig(tls=config.client_tls()))
        self.auditor = Auditor(
            store,
            self.client,
            identity,
            AuditorSettings(
                lost_bookie_recovery_delay_s=config.lost_bookie_recovery_delay,
                periodic_check_interval_s=config.auditor_periodic_check_interval,
                entry_level_check=config.auditor_entry_level_check,
            ),
        )
        self.worker = ReplicationWorker(
            store,
            self.client,
            WorkerSettings(
                rate_bytes_per_s=config.replication_rate_by_bytes,
                open_ledger_grace_s=config.open_ledger_rereplication_grace_period / 1000,
                poll_interval_s=config.replication_worker_poll_interval,
            ),
        )
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._guard("auditor", self.auditor.run), name="autorecovery-auditor"),
            loop.create_task(self._guard("replication worker", self.worker.run), name="autorecovery-worker"),
        ]

    @staticmethod
    async def _guard(name: str, run: Callable[[], Awaitable[None]]) -> None:
        """Keep the role alive across unexpected failures (logged), as BookKeeper restarts it."""
        while True:
            try:
                await run()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("auto-recovery %s failed; restarting it in 1s", name)
                await asyncio.sleep(1)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.client.close()
