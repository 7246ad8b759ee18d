"""The entry digest shared by the ledger client and the bookie.

CRC32C over ``ledger_id (u64) | entry_id (u64) | last_add_confirmed (i64) | payload``, all
big-endian, so that an entry cannot be mistaken for another ledger's or another position's bytes.
The client computes it on add and checks it on read; the bookie checks it on add (refusing bytes
damaged in flight) and on every read of its own storage (never serving a corrupt entry).
"""

from __future__ import annotations

import hashlib
import struct

import google_crc32c

_HEADER = struct.Struct(">qqq")


def entry_digest(ledger_id: int, entry_id: int, last_add_confirmed: int, payload: bytes) -> int:
    crc = google_crc32c.value(_HEADER.pack(ledger_id, entry_id, last_add_confirmed))
    return int(google_crc32c.extend(crc, payload))


def verify(ledger_id: int, entry_id: int, last_add_confirmed: int, payload: bytes, digest: int) -> bool:
    return entry_digest(ledger_id, entry_id, last_add_confirmed, payload) == digest


def master_key(password: bytes) -> bytes:
    """The ledger's master key, as BookKeeper derives it (SHA-1 of ``b"ledger" + password``).

    The key, not the password, travels with every add, fence, explicit LAC and recovery read;
    a bookie refuses those calls for a ledger whose recorded key differs.
    """
    return hashlib.sha1(b"ledger" + password, usedforsecurity=False).digest()
