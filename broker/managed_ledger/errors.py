"""What managed ledgers and cursors raise (Pulsar's ManagedLedgerException family)."""

from __future__ import annotations


class ManagedLedgerError(Exception):
    """Base of every managed-ledger failure; the message names the managed ledger."""


class ManagedLedgerFencedError(ManagedLedgerError):
    """Another broker opened this managed ledger: this instance can no longer write."""


class ManagedLedgerClosedError(ManagedLedgerError):
    """The managed ledger (or cursor) was closed on this broker."""


class ManagedLedgerTerminatedError(ManagedLedgerError):
    """The managed ledger was terminated: it takes no more entries."""
