"""Which consumed ledgers retention lets go (Pulsar's ``retentionTimeInMinutes`` and
``retentionSizeInMB``): closed ledgers that every durable cursor has consumed, oldest first, as
long as each was closed longer ago than the retention time or the data kept exceeds the size."""

from __future__ import annotations

from magnetar.broker.managed_ledger.config import ManagedLedgerConfig
from magnetar.broker.managed_ledger.meta_store import LedgerInfo
from magnetar.broker.managed_ledger.position import Position

MB = 1024 * 1024


def consumed_beyond_retention(
    ledgers: list[LedgerInfo], marks: list[Position], config: ManagedLedgerConfig, now_ms: int
) -> list[LedgerInfo]:
    """``marks``: the durable cursors' mark-delete positions (none: everything is consumed)."""
    time_ms = config.retention_time_minutes * 60_000
    size_limit = config.retention_size_mb * MB
    if time_ms < 0 and size_limit < 0:
        return []
    slowest = min(marks) if marks else None
    total = sum(i.size for i in ledgers)
    doomed: list[LedgerInfo] = []
    for info in ledgers[:-1]:  # never the ledger being written (or the last one)
        if info.entries < 0:
            break
        consumed = (
            slowest is None
            or info.ledger_id < slowest.ledger_id
            or (info.ledger_id == slowest.ledger_id and slowest.entry_id >= info.entries - 1)
        )
        expired = time_ms >= 0 and now_ms - info.timestamp_ms >= time_ms
        over_size = size_limit >= 0 and total > size_limit
        if not consumed or not (expired or over_size):
            break
        doomed.append(info)
        total -= info.size
    return doomed
