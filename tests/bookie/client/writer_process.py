"""A ledger writer in its own process, so a test can kill -9 it mid-stream.

    python writer_process.py METADATA_URI ENTRIES

Creates a ledger with E=3/Qw=2/Qa=2, prints ``ledger <id>`` and then ``acked <entry id>`` for every
acknowledged entry (flushed at once), pipelining adds; payloads are ``payload(entry_id)``.
"""

from __future__ import annotations

import asyncio
import sys

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.common.metadata import open_store


def payload(entry_id: int) -> bytes:
    return f"entry-{entry_id:08d}".encode() * 8


async def main(uri: str, entries: int) -> None:
    store = await open_store(uri)
    client = LedgerClient(store, LedgerClientConfig(ensemble_size=3, write_quorum=2, ack_quorum=2))
    writer = await client.create_ledger()
    print(f"ledger {writer.ledger_id}", flush=True)
    window: list[asyncio.Future[int]] = []
    for entry_id in range(entries):
        window.append(writer.add_entry_async(payload(entry_id)))
        if len(window) >= 50:
            for future in window:
                print(f"acked {await future}", flush=True)
            window.clear()
    for future in window:
        print(f"acked {await future}", flush=True)
    print("done", flush=True)
    await asyncio.sleep(3600)  # wait to be killed: the ledger stays open


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
