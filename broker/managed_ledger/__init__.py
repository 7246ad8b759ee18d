"""Managed ledgers (Pulsar's ManagedLedger / ManagedCursor split): a topic's log.

A managed ledger is a list of BookKeeper ledgers, one open for writes, rolled by entry count,
size and age; its list lives in the metadata store at ``/managed-ledgers/<name>``. A cursor is a
subscription's position: the mark-delete position (everything at or before it is acknowledged)
plus the individually acknowledged positions after it, persisted at
``/managed-ledgers/<name>/cursors/<cursor>`` shortly after every change and at close, so a
broker restart redelivers nothing that was acknowledged. Reopening a managed ledger fences and
closes its last ledger (the previous owner can write no more) and starts a new one.
"""

from magnetar.broker.managed_ledger.cursor import ManagedCursor
from magnetar.broker.managed_ledger.factory import ManagedLedgerFactory
from magnetar.broker.managed_ledger.ledger import ManagedLedger, ManagedLedgerConfig, ManagedLedgerError
from magnetar.broker.managed_ledger.position import Entry, InitialPosition, Position

__all__ = [
    "Entry",
    "InitialPosition",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerConfig",
    "ManagedLedgerError",
    "ManagedLedgerFactory",
    "Position",
]
