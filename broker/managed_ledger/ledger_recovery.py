"""Closing a ledger its writer left open (architecture §5, "Fencing and recovery"): the ledger is
fenced, so a previous owner can add no more, and its end is learnt from the bookies. Done at the
open of a managed ledger for what a previous owner left, and for a ledger whose writer failed."""

from __future__ import annotations

import time

from magnetar.bookie.client import BKError, LedgerClient, NoSuchLedgerError, ReadHandle
from magnetar.broker.managed_ledger.errors import ManagedLedgerError
from magnetar.broker.managed_ledger.meta_store import LedgerInfo


async def recover(client: LedgerClient, name: str, info: LedgerInfo) -> ReadHandle | None:
    """Fence ``info``'s ledger and record its end in ``info``; the handle to read it with, None
    when the ledger is gone (it was never written: it counts as empty)."""
    try:
        handle = await client.open_ledger(info.ledger_id)
    except NoSuchLedgerError:
        info.entries = 0
        return None
    except BKError as exc:
        raise ManagedLedgerError(
            f"cannot recover ledger {info.ledger_id} of managed ledger {name}: {exc}"
        ) from exc
    info.entries = handle.last_add_confirmed + 1
    info.size = max(info.size, handle.metadata.length)
    info.timestamp_ms = int(time.time() * 1000)
    return handle
