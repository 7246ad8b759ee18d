"""Managed ledgers (Pulsar's ManagedLedger / ManagedCursor split): a topic's log.

The model:

* A **managed ledger** is a list of BookKeeper ledgers. Entries are appended to the last one;
  it is rolled (closed, a new one created) by entry count, size and age. Positions are
  ``(ledger_id, entry_id)`` and order the log. Its metadata — the ledgers with their entry
  counts, sizes and close times — is JSON at ``/managed-ledgers/<name>`` in the metadata store,
  written with compare-and-set on the node version at every roll, trim and close.
* **Opening** a managed ledger fences and closes (BookKeeper recovery) any ledger a previous
  owner left open, then creates a new ledger for writes, exactly as Pulsar does: the previous
  owner's next add fails (its ledger is fenced) and its next metadata write fails (the version
  moved), both as ``ManagedLedgerFencedError``.
* A **cursor** is a subscription's position: the mark-delete position (everything at or before
  it is acknowledged) plus the ranges individually acknowledged after it (Pulsar's
  individuallyDeletedMessages); ranges that continue the mark-delete position fold into it. A
  durable cursor's state (and the properties stored with its mark-delete, which deduplication
  uses) is appended to a cursor ledger of its own on the bookies ``cursor_flush_interval_ms``
  (100 ms) at most after every acknowledgement and at ``seek``; its node
  ``/managed-ledgers/<name>/cursors/<cursor>`` holds only that ledger's id and a snapshot,
  written with compare-and-set when the ledger changes, at the takeover of an open and at close
  (``cursor_ledger.py``). At most ``max_unacked_ranges_to_persist`` ranges are persisted.
  The read position lives in memory only: after a restart a cursor reads from its mark-delete
  position on, skipping acknowledged ranges. Non-durable cursors (readers) persist nothing.
* **Retention**: closed ledgers that every durable cursor has passed are deleted (from the
  metadata, then from the bookies) once ``retention_time_minutes`` / ``retention_size_mb``
  allow; checked at every ledger roll, when a cursor's mark-delete enters a new ledger, and every
  ``retention_check_interval_seconds``.
* A **topic ledger** (``TopicLedger``) is what a topic needs of its log. ``ManagedLedger`` is the
  owner's; a non-persistent topic's log in memory and a read-only owner's tail of the writable
  owner's log are others, built from the same parts (``span``, ``reads``, ``ledger_readers``),
  not from ``ManagedLedger``.
"""

from magnetar.broker.managed_ledger.config import ManagedLedgerConfig
from magnetar.broker.managed_ledger.cursor import ManagedCursor
from magnetar.broker.managed_ledger.errors import (
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
)
from magnetar.broker.managed_ledger.factory import ManagedLedgerFactory
from magnetar.broker.managed_ledger.ledger import ManagedLedger
from magnetar.broker.managed_ledger.meta_store import LedgerInfo
from magnetar.broker.managed_ledger.position import Entry, InitialPosition, Position
from magnetar.broker.managed_ledger.topic_ledger import TopicLedger

__all__ = [
    "Entry",
    "InitialPosition",
    "LedgerInfo",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerClosedError",
    "ManagedLedgerConfig",
    "ManagedLedgerError",
    "ManagedLedgerFactory",
    "ManagedLedgerFencedError",
    "ManagedLedgerTerminatedError",
    "Position",
    "TopicLedger",
]
