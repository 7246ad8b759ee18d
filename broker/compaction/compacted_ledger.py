"""The compacted ledger: the messages compaction kept, each with the position it has in the
topic (consumers see the original message ids), in a BookKeeper ledger of its own written
through the ledger client, as Pulsar keeps it."""

from __future__ import annotations

import struct

from magnetar.bookie.client import LedgerClient
from magnetar.broker.managed_ledger import Entry, Position

_POSITION = struct.Struct(">qq")
#: entries read per request when loading
_READ_CHUNK = 500


async def write(client: LedgerClient, topic: str, entries: list[Entry]) -> int:
    """A new closed ledger holding ``entries``; its id."""
    handle = await client.create_ledger(custom={"compacted-topic": topic})
    for entry in entries:
        await handle.add_entry(_POSITION.pack(entry.position.ledger_id, entry.position.entry_id) + entry.data)
    await handle.close()
    return handle.ledger_id


async def read(client: LedgerClient, ledger_id: int) -> list[Entry]:
    handle = await client.open_ledger_no_recovery(ledger_id)
    entries: list[Entry] = []
    last = handle.last_add_confirmed
    for first in range(0, last + 1, _READ_CHUNK):
        for raw in await handle.read(first, min(last, first + _READ_CHUNK - 1)):
            ledger, entry = _POSITION.unpack_from(raw.payload)
            entries.append(Entry(Position(ledger, entry), raw.payload[_POSITION.size :]))
    return entries
