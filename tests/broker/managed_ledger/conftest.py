"""Storage for managed-ledger tests: a metadata store and two in-process bookies registered in it.

``storage`` uses an in-process memory store; ``storage_any`` runs a test once per metadata
backend (memory, sqlite file, ZooKeeper). ``Storage.new_client`` opens another store session and
ledger client on the same data, as a second broker process would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.server import BookieServer, start_bookie
from magnetar.broker.managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory
from magnetar.common.metadata import MetadataStore, open_store


@dataclass
class Storage:
    url: str
    store: MetadataStore
    client: LedgerClient
    bookies: list[BookieServer]
    _others: list[tuple[MetadataStore, LedgerClient]] = field(default_factory=list)

    async def new_client(self) -> tuple[MetadataStore, LedgerClient]:
        """Another store session and ledger client (closed by the fixture)."""
        store = await open_store(self.url)
        client = LedgerClient(store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))
        self._others.append((store, client))
        return store, client

    async def new_factory(self, config: ManagedLedgerConfig | None = None) -> ManagedLedgerFactory:
        """A factory as a freshly started broker would have: its own session and client."""
        store, client = await self.new_client()
        return ManagedLedgerFactory(store, client, config)

    async def close(self) -> None:
        for store, client in [*self._others, (self.store, self.client)]:
            await client.close()
            await store.close()


async def _storage(url: str, tmp_path: Path) -> Storage:
    bookies = []
    for index in range(2):
        root = tmp_path / f"bookie-{index}"
        config = BookieConfig(
            bookie_port=0,
            journal_directory=str(root / "journal"),
            ledger_directories=[str(root / "ledgers")],
            metadata_service_uri=url,
            prometheus_stats_http_port=0,
            auto_recovery_daemon_enabled=False,
        )
        bookies.append(await start_bookie(config))
    store = await open_store(url)
    client = LedgerClient(store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))
    return Storage(url, store, client, bookies)


async def _stop(storage: Storage) -> None:
    await storage.close()
    for bookie in storage.bookies:
        await bookie.stop()


@pytest.fixture
async def storage(tmp_path: Path, memory_url: str) -> AsyncIterator[Storage]:
    result = await _storage(memory_url, tmp_path)
    yield result
    await _stop(result)


@pytest.fixture
async def storage_any(tmp_path: Path, store_url: str) -> AsyncIterator[Storage]:
    result = await _storage(store_url, tmp_path)
    yield result
    await _stop(result)
