"""When the ledger being written is full and the next add starts a new one (Pulsar's ledger
rollover): at ``max_size_per_ledger_mb``, at ``max_ledger_rollover_time_minutes``, or at
``max_entries_per_ledger`` once it is ``min_ledger_rollover_time_minutes`` old."""

from __future__ import annotations

import time

from magnetar.bookie.client import LedgerHandle
from magnetar.broker.managed_ledger.config import ManagedLedgerConfig

MB = 1024 * 1024


def is_full(writer: LedgerHandle, created: float, config: ManagedLedgerConfig) -> bool:
    """``created``: when the writer's ledger was started (time.monotonic())."""
    if writer.length >= config.max_size_per_ledger_mb * MB:
        return True
    if writer.last_add_confirmed < 0:
        return False
    age_min = (time.monotonic() - created) / 60
    if config.max_ledger_rollover_time_minutes > 0 and age_min >= config.max_ledger_rollover_time_minutes:
        return True
    full = writer.last_add_confirmed + 1 >= config.max_entries_per_ledger
    return full and age_min >= config.min_ledger_rollover_time_minutes
