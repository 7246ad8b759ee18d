"""Deleting a ledger that left a managed ledger's log (consumed, never written, or the whole
managed ledger deleted) from the bookies. It runs in the background: the log no longer refers to
the ledger, so one that cannot be deleted is an orphan, logged, and harms nothing."""

from __future__ import annotations

import logging

from magnetar.bookie.client import BKError, LedgerClient, NoSuchLedgerError

log = logging.getLogger(__name__)


async def delete_ledger(client: LedgerClient, name: str, ledger_id: int) -> None:
    """Delete ``ledger_id`` of the managed ledger ``name``; one already gone is fine."""
    try:
        await client.delete_ledger(ledger_id)
    except NoSuchLedgerError:
        pass
    except BKError as exc:
        log.warning("%s: could not delete ledger %d: %s", name, ledger_id, exc)
