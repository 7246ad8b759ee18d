"""What the ledger client raises; each names the ledger (and entry or bookie) concerned.

The names follow BookKeeper's BKException family so that a reader who knows BookKeeper finds them.
"""

from __future__ import annotations


class BKError(Exception):
    """Base of every ledger-client failure."""


class NotEnoughBookiesError(BKError):
    """Fewer writable bookies than the ensemble needs (BookKeeper's BKNotEnoughBookiesException)."""

    def __init__(self, needed: int, available: list[str]) -> None:
        self.needed = needed
        self.available = available
        names = ", ".join(available) if available else "none"
        super().__init__(f"not enough writable bookies: need {needed}, have {len(available)} ({names})")


class NoSuchLedgerError(BKError):
    def __init__(self, ledger_id: int, where: str = "metadata store") -> None:
        self.ledger_id = ledger_id
        super().__init__(f"ledger {ledger_id} does not exist in the {where}")


class NoSuchEntryError(BKError):
    def __init__(self, ledger_id: int, entry_id: int, detail: str = "") -> None:
        self.ledger_id, self.entry_id = ledger_id, entry_id
        super().__init__(f"entry {ledger_id}:{entry_id} does not exist{': ' + detail if detail else ''}")


class LedgerFencedError(BKError):
    """The ledger was fenced by a recovering reader; this writer may add nothing more."""

    def __init__(self, ledger_id: int) -> None:
        self.ledger_id = ledger_id
        super().__init__(f"ledger {ledger_id} is fenced: another client opened it for recovery")


class UnauthorizedAccessError(BKError):
    """The bookie holds the ledger under another master key (BookKeeper's
    BKUnauthorizedAccessException): this client was given the wrong password."""

    def __init__(self, ledger_id: int, bookie: str, detail: str = "") -> None:
        self.ledger_id, self.bookie = ledger_id, bookie
        why = f": {detail}" if detail else ""
        super().__init__(f"bookie {bookie} refuses access to ledger {ledger_id}: wrong master key{why}")


class DuplicateEntryIdError(BKError):
    """The bookie stores this entry with another payload and never replaces it (BookKeeper's
    BKDuplicateEntryIdException)."""

    def __init__(self, ledger_id: int, entry_id: int, bookie: str) -> None:
        self.ledger_id, self.entry_id, self.bookie = ledger_id, entry_id, bookie
        super().__init__(f"bookie {bookie} already stores entry {ledger_id}:{entry_id} with another payload")


class LedgerClosedError(BKError):
    def __init__(self, ledger_id: int) -> None:
        self.ledger_id = ledger_id
        super().__init__(f"ledger {ledger_id} is closed: no more entries can be added")


class ReadPastLacError(BKError):
    """A tailing reader asked for entries that are not yet confirmed (past the LAC)."""

    def __init__(self, ledger_id: int, entry_id: int, lac: int) -> None:
        self.ledger_id, self.entry_id, self.lac = ledger_id, entry_id, lac
        super().__init__(f"entry {ledger_id}:{entry_id} is past the last add confirmed ({lac})")


class DigestMismatchError(BKError):
    def __init__(self, ledger_id: int, entry_id: int, bookie: str) -> None:
        self.ledger_id, self.entry_id, self.bookie = ledger_id, entry_id, bookie
        super().__init__(f"entry {ledger_id}:{entry_id} from bookie {bookie} fails its digest check")


class ReadEntryError(BKError):
    """No replica of an entry could be read; ``failures`` says what each bookie answered."""

    def __init__(self, ledger_id: int, entry_id: int, failures: dict[str, str]) -> None:
        self.ledger_id, self.entry_id, self.failures = ledger_id, entry_id, failures
        detail = "; ".join(f"{b}: {why}" for b, why in failures.items())
        super().__init__(f"cannot read entry {ledger_id}:{entry_id} from any replica ({detail})")


class BookieUnavailableError(BKError):
    def __init__(self, bookie: str, detail: str) -> None:
        self.bookie = bookie
        super().__init__(f"bookie {bookie} is unavailable: {detail}")


class LedgerRecoveryError(BKError):
    def __init__(self, ledger_id: int, detail: str) -> None:
        self.ledger_id = ledger_id
        super().__init__(f"cannot recover ledger {ledger_id}: {detail}")
