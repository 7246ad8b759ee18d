"""The ledger client: how a broker writes and reads ledgers on bookies (architecture §5, the seed on
BookKeeper). ``LedgerClient`` is the entry point; see ``client.py``."""

from magnetar.bookie.client.batch_read import read_batched
from magnetar.bookie.client.client import LedgerClient, LedgerClientConfig
from magnetar.bookie.client.errors import (
    BKError,
    BookieUnavailableError,
    DigestMismatchError,
    LedgerClosedError,
    LedgerFencedError,
    LedgerRecoveryError,
    NoSuchEntryError,
    NoSuchLedgerError,
    NotEnoughBookiesError,
    ReadEntryError,
    ReadPastLacError,
)
from magnetar.bookie.client.ledger_handle import LedgerHandle
from magnetar.bookie.client.ledger_metadata import LedgerMetadata, LedgerState
from magnetar.bookie.client.read_handle import ReadHandle

__all__ = [
    "BKError",
    "BookieUnavailableError",
    "DigestMismatchError",
    "LedgerClient",
    "LedgerClientConfig",
    "LedgerClosedError",
    "LedgerFencedError",
    "LedgerHandle",
    "LedgerMetadata",
    "LedgerRecoveryError",
    "LedgerState",
    "NoSuchEntryError",
    "NoSuchLedgerError",
    "NotEnoughBookiesError",
    "ReadEntryError",
    "ReadHandle",
    "ReadPastLacError",
    "read_batched",
]
