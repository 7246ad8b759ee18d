"""The ledger client adds over a bookie's framed add port when the bookie registers one, and over
gRPC's stream when it does not; either way every entry reads back (in process, memory store)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.bookie.server import BookieServer, start_bookie
from magnetar.common.metadata import open_store
from tests.bookie.helpers import config

_STORES = itertools.count()


@asynccontextmanager
async def cluster(root: Path, **settings: Any) -> AsyncIterator[tuple[list[BookieServer], LedgerClient]]:
    uri = f"memory://framed-adds-{next(_STORES)}"
    async with AsyncExitStack() as stack:
        bookies = []
        for i in range(2):
            server = await start_bookie(config(root / f"bookie-{i}", metadata_service_uri=uri, **settings))
            stack.push_async_callback(server.stop)
            bookies.append(server)
        store = await open_store(uri)
        stack.push_async_callback(store.close)
        client = LedgerClient(store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))
        stack.push_async_callback(client.close)
        yield bookies, client


async def write_and_read_back(client: LedgerClient, count: int) -> None:
    writer = await client.create_ledger()
    for start in range(0, count, 50):
        for future in [writer.add_entry_async(b"entry %d" % i) for i in range(start, start + 50)]:
            await future
    await writer.close()
    reader = await client.open_ledger_no_recovery(writer.ledger_id)
    assert [e.payload for e in await reader.read(0, count - 1)] == [b"entry %d" % i for i in range(count)]


async def test_adds_go_over_the_add_port_a_bookie_registers(tmp_path: Path) -> None:
    async with cluster(tmp_path) as (bookies, client):
        await write_and_read_back(client, 200)
        for bookie in bookies:
            requests = bookie.bookie.stats.add_requests
            assert requests["framed"] > 0, requests
            assert requests["grpc"] == 0, requests


async def test_adds_go_over_grpc_to_a_bookie_without_an_add_port(tmp_path: Path) -> None:
    async with cluster(tmp_path, framed_adds_enabled=False) as (bookies, client):
        await write_and_read_back(client, 200)
        for bookie in bookies:
            requests = bookie.bookie.stats.add_requests
            assert requests["grpc"] > 0, requests
            assert requests["framed"] == 0, requests
