"""The periodic check of a factory's managed ledgers: one timer for all of them, as Pulsar's
ManagedLedgerFactory schedules its ledgers' checks on one executor, instead of a task sleeping in
every managed ledger (a broker with 100,000 idle topics held 100,000 of them).

Every ``retention_check_interval_seconds`` the timer visits the open ledgers; those with work
(a ledger past its rollover age, or closed ledgers retention may let go) run their check in
their own background tasks, which their close waits for. A ledger with nothing to do costs a
look and no task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Protocol


class Maintained(Protocol):
    def maintain(self) -> None:
        """Start the ledger's check if it has work (and none is running)."""


class MaintenanceTimer:
    def __init__(self, interval_s: float, ledgers: Callable[[], Iterable[Maintained]]) -> None:
        self._interval_s = interval_s
        self._ledgers = ledgers
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Arm the timer if it is not armed (at each open: idle without ledgers, it stops)."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._interval_s, self._tick)

    def _tick(self) -> None:
        self._timer = None
        ledgers = list(self._ledgers())
        for ledger in ledgers:
            ledger.maintain()
        if ledgers:
            self.start()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
