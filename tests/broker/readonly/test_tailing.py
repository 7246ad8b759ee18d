"""A read-only owner's managed ledger tails the writable owner's, on real (in-process) bookies:
every entry in order, the last one before a pause too (explicit LAC), across ledger rolls
noticed by metadata polling (PIP-63 option C) or by a watch (option A), without disturbing the
writer (no fencing: it keeps writing)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.broker.managed_ledger import InitialPosition, ManagedLedgerConfig, ManagedLedgerFactory
from magnetar.broker.read_only.ledger import ReadOnlyManagedLedger, ReadOnlyManagedLedgerError

if TYPE_CHECKING:
    from ..conftest import Storage


@pytest.mark.parametrize("mode", ["poll", "watch"])
async def test_tails_across_rolls_and_pauses(storage: Storage, mode: str) -> None:
    config = ManagedLedgerConfig(max_entries_per_ledger=7, min_ledger_rollover_time_minutes=0)
    # The writer advances the LAC explicitly when it pauses, as a writable broker does.
    writer_client = LedgerClient(
        storage.store,
        LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2, explicit_lac_interval_s=0.05),
    )
    writable = await ManagedLedgerFactory(storage.store, writer_client, config).open("t/ns/persistent/tail")
    # A subscription at the writable owner holds the ledgers back from retention.
    await writable.open_cursor("held", InitialPosition.EARLIEST)
    store, client = await storage.new_client()
    reader = ReadOnlyManagedLedger(
        "t/ns/persistent/tail", store, client, config, topic="persistent://t/ns/tail", cursors=None,
        poll_interval_s=0.2, watch=mode == "watch",
    )  # fmt: skip
    await reader.open()
    cursor = reader.new_non_durable_cursor(InitialPosition.EARLIEST)
    received: list[bytes] = []

    async def read_until(count: int) -> None:
        while len(received) < count:
            received.extend(e.data for e in await cursor.read_entries_or_wait(10))

    sent = []
    for burst in range(4):
        for i in range(9):
            data = f"m{burst}-{i}".encode()
            await writable.add_entry(data)
            sent.append(data)
        # A pause: nothing more is written until the reader has it all, the last entry included.
        await asyncio.wait_for(read_until(len(sent)), 20)
    assert received == sent
    assert len({e.position.ledger_id for e in await reader.read_entries(reader.first_position(), 100)}) >= 4
    assert not writable.is_fenced, "the read-only owner never fences the writer"
    with pytest.raises(ReadOnlyManagedLedgerError):
        await reader.add_entry(b"nope")
    await reader.close()
    await writable.close()
    await writer_client.close()
    await client.close()
    await store.close()
