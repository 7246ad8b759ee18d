"""Read-only mode when the disks fill up (BookKeeper's LedgerDirsMonitor).

Every ``disk_check_interval`` the fullest of the journal and ledger directories is compared with
``disk_usage_threshold``: at or past it the bookie turns read-only (adds refused, reads served)
— or, with ``read_only_mode_enabled`` off, shuts down. It turns writable again only below
``disk_usage_lwm_threshold``, so a disk hovering at the threshold does not flap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from magnetar.bookie.bookie import Bookie

log = logging.getLogger(__name__)

UsageProbe = Callable[[Path], float]


def disk_usage(path: Path) -> float:
    """Fraction of the filesystem holding ``path`` that is used (blocking)."""
    usage = shutil.disk_usage(path)
    return (usage.total - usage.free) / usage.total if usage.total else 0.0


class DiskMonitor:
    def __init__(
        self,
        bookie: Bookie,
        *,
        on_full: Callable[[], None],
        probe: UsageProbe = disk_usage,
    ) -> None:
        config = bookie.config
        self._bookie = bookie
        self._dirs = [Path(config.journal_directory), *bookie.ledger_dirs]
        self._threshold = config.disk_usage_threshold
        self._lwm = config.disk_usage_lwm_threshold
        self._interval_s = config.disk_check_interval / 1000
        self._read_only_enabled = config.read_only_mode_enabled
        self._on_full = on_full
        self._probe = probe
        self._full = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="bookie-disk-monitor")

    async def _run(self) -> None:
        while True:
            try:
                await self.check()
            except OSError as exc:
                log.error("disk check failed: %s", exc)
            await asyncio.sleep(self._interval_s)

    async def check(self) -> float:
        """One check; returns the highest usage seen."""
        usages = await asyncio.to_thread(lambda: [(self._probe(d), d) for d in self._dirs])
        usage, fullest = max(usages)
        if usage >= self._threshold and not self._full:
            self._full = True
            if not self._read_only_enabled:
                log.error(
                    "disk %s is %.1f%% full (threshold %.1f%%) and read-only mode is disabled: shutting down",
                    fullest,
                    usage * 100,
                    self._threshold * 100,
                )
                self._on_full()
                return usage
            log.warning(
                "disk %s is %.1f%% full (threshold %.1f%%): going read-only",
                fullest,
                usage * 100,
                self._threshold * 100,
            )
            self._bookie.set_read_only(True)
        elif usage < self._lwm and self._full:
            self._full = False
            log.info("disks below %.1f%% (fullest %s): writable again", self._lwm * 100, fullest)
            self._bookie.set_read_only(False)
        return usage

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
