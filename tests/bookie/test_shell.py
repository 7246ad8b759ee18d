"""``magnetar shell`` against real bookie processes and ZooKeeper, as an operator would use it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.common.metadata import open_store
from tests.bookie.conftest import BookieFactory

pytestmark = [pytest.mark.zookeeper]


def shell(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "magnetar", "shell", "-m", url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )


async def write_ledger(url: str, entries: int) -> int:
    store = await open_store(url)
    try:
        config = LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2)
        async with LedgerClient(store, config) as c:
            writer = await c.create_ledger()
            for i in range(entries):
                await writer.add_entry(f"hello-{i}".encode())
            await writer.close()
            return writer.ledger_id
    finally:
        await store.close()


def test_shell_lists_bookies_shows_metadata_and_reads_entries(
    zk_url: str, bookie_factory: BookieFactory
) -> None:
    bookies = [bookie_factory(zk_url), bookie_factory(zk_url)]
    ledger_id = asyncio.run(write_ledger(zk_url, 3))

    listed = shell(zk_url, "listbookies")
    assert listed.returncode == 0, listed.stderr
    for bookie in bookies:
        assert bookie.bookie_id in listed.stdout
    assert listed.stdout.count("writable") == 2

    shown = shell(zk_url, "ledgermetadata", str(ledger_id))
    assert shown.returncode == 0, shown.stderr
    metadata = json.loads(shown.stdout)
    assert metadata["state"] == "CLOSED"
    assert metadata["last_entry_id"] == 2

    read = shell(zk_url, "readledger", str(ledger_id))
    assert read.returncode == 0, read.stderr
    assert [line.split()[-1] for line in read.stdout.splitlines()] == ["hello-0", "hello-1", "hello-2"]

    missing = shell(zk_url, "ledgermetadata", "999999")
    assert missing.returncode != 0
    assert "999999" in missing.stderr
