"""Whether this broker's instance of a managed ledger has been deposed: another broker opened the
managed ledger (rewrote its metadata), so this one may write no more.

Shared by the managed ledger and the part that finds it out (its record in the metadata store),
so that part holds this small object and not the managed ledger itself: no reference cycle, and
a closed managed ledger is freed as soon as nothing uses it.
"""

from __future__ import annotations

import logging

from magnetar.broker.managed_ledger.errors import ManagedLedgerFencedError

log = logging.getLogger(__name__)


class Fencing:
    __slots__ = ("fenced", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fenced = False

    def deposed(self, why: str) -> ManagedLedgerFencedError:
        """Mark the instance deposed; the error its writes now fail with."""
        if not self.fenced:
            log.warning("managed ledger %s fenced: %s", self.name, why)
        self.fenced = True
        return ManagedLedgerFencedError(
            f"managed ledger {self.name} was opened by another broker; this instance can no longer "
            f"write ({why})"
        )
