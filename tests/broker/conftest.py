"""Storage for broker tests: an in-process metadata store and two in-process bookies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.server import BookieServer, start_bookie
from magnetar.common.metadata import MetadataStore, open_store


@dataclass
class Storage:
    url: str
    store: MetadataStore
    client: LedgerClient
    bookies: list[BookieServer]

    async def new_client(self) -> tuple[MetadataStore, LedgerClient]:
        """Another session and client, as a second broker process would have."""
        store = await open_store(self.url)
        return store, LedgerClient(store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))


@pytest.fixture
async def storage(tmp_path: Path, memory_url: str) -> AsyncIterator[Storage]:
    bookies = []
    for index in range(2):
        root = tmp_path / f"bookie-{index}"
        config = BookieConfig(
            bookie_port=0,
            journal_directory=str(root / "journal"),
            ledger_directories=[str(root / "ledgers")],
            metadata_service_uri=memory_url,
            prometheus_stats_http_port=0,
            auto_recovery_daemon_enabled=False,
        )
        bookies.append(await start_bookie(config))
    store = await open_store(memory_url)
    client = LedgerClient(store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))
    yield Storage(memory_url, store, client, bookies)
    await client.close()
    await store.close()
    for bookie in bookies:
        await bookie.stop()
