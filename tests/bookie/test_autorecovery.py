"""Auto-recovery against real bookie processes and ZooKeeper: a bookie is killed for real and
every entry gets its Qw copies back on the others; decommissioning; too few bookies; a bookie
that comes back. Each bookie runs the auditor election and a replication worker, as configured
for production, with a one-second grace period so the tests need not wait thirty."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from magnetar.bookie.autorecovery.marks import UnderReplication
from magnetar.bookie.client import LedgerClient, LedgerClientConfig, LedgerMetadata
from magnetar.bookie.digest import verify
from magnetar.common.metadata import MetadataStore, open_store
from tests.bookie.conftest import BookieFactory, BookieProcess

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

RECOVERY_SETTINGS = {
    "lost_bookie_recovery_delay": 1,
    "replication_worker_poll_interval": 0.2,
    "open_ledger_rereplication_grace_period": 1000,
    "zk_timeout": 2000,  # a killed bookie's registration goes after 2 s
}


def body(ledger_id: int, entry_id: int) -> bytes:
    return f"L{ledger_id}-E{entry_id}|".encode() * 20


@dataclass
class Cluster:
    url: str
    store: MetadataStore
    client: LedgerClient
    bookies: list[BookieProcess]
    factory: BookieFactory

    def by_id(self, bookie_id: str) -> BookieProcess:
        return next(b for b in self.bookies if b.bookie_id == bookie_id)

    async def add_bookie(self) -> BookieProcess:
        bookie = await self.factory.start_async(self.url, **RECOVERY_SETTINGS)
        self.bookies.append(bookie)
        return bookie


async def start(factory: BookieFactory, url: str, count: int) -> list[BookieProcess]:
    bookies = [factory(url, start=False, **RECOVERY_SETTINGS) for _ in range(count)]
    with ThreadPoolExecutor(count) as pool:
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: list(pool.map(lambda b: b.start(), bookies))
        )


async def make_cluster(zk_url: str, factory: BookieFactory, count: int) -> AsyncIterator[Cluster]:
    bookies = await start(factory, zk_url, count)
    store = await open_store(zk_url)
    client = LedgerClient(store, LedgerClientConfig(ensemble_size=3, write_quorum=2, ack_quorum=2))
    yield Cluster(zk_url, store, client, bookies, factory)
    await client.close()
    await store.close()


@pytest.fixture
async def four(zk_url: str, bookie_factory: BookieFactory) -> AsyncIterator[Cluster]:
    async for cluster in make_cluster(zk_url, bookie_factory, 4):
        yield cluster


@pytest.fixture
async def three(zk_url: str, bookie_factory: BookieFactory) -> AsyncIterator[Cluster]:
    async for cluster in make_cluster(zk_url, bookie_factory, 3):
        yield cluster


async def write_ledgers(client: LedgerClient, ledgers: int, entries: int) -> list[int]:
    ids = []
    for _ in range(ledgers):
        writer = await client.create_ledger()
        futures = []
        for entry_id in range(entries):
            futures.append(writer.add_entry_async(body(writer.ledger_id, entry_id)))
            if len(futures) == 500:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
        await writer.close()
        ids.append(writer.ledger_id)
    return ids


async def eventually(check: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():  # type: ignore[misc]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not reached in {timeout_s}s: {what}")
        await asyncio.sleep(0.5)


async def nobody_uses(cluster: Cluster, bookie_id: str, ledger_ids: list[int]) -> bool:
    for ledger_id in ledger_ids:
        if bookie_id in (await cluster.client.ledger_metadata(ledger_id)).bookies():
            return False
    return not await UnderReplication(cluster.store).ledgers()


async def assert_fully_replicated(
    cluster: Cluster, metadata: LedgerMetadata, ledger_id: int, step: int
) -> None:
    """Every ``step``-th entry (and every fragment's first and last) is intact on each of its
    Qw bookies, asked of each bookie directly (in batch reads) rather than through the client's
    fallback to another replica."""
    checks = set(range(0, metadata.last_entry_id + 1, step))
    for first, last, _ in metadata.fragments(metadata.last_entry_id):
        checks |= {first, last}
    expected: dict[str, list[int]] = {}
    for entry_id in sorted(checks):
        for bookie in metadata.write_set(entry_id):
            expected.setdefault(bookie, []).append(entry_id)

    async def check(bookie: str, entry_ids: list[int]) -> None:
        connection = await cluster.client.pool.get(bookie)
        while entry_ids:
            response = await connection.read_entries(ledger_id, entry_ids[:256])
            assert not response.failed, f"{bookie}: {response.failed[0]}"
            assert response.entries, f"{bookie} served none of {entry_ids[:256]}"
            for asked, entry in zip(entry_ids, response.entries, strict=False):
                assert (entry.ledger_id, entry.entry_id) == (ledger_id, asked)
                assert entry.payload == body(ledger_id, asked)
                assert verify(ledger_id, asked, entry.last_add_confirmed, entry.payload, entry.digest)
            entry_ids = entry_ids[len(response.entries) :]

    await asyncio.gather(*(check(bookie, ids) for bookie, ids in expected.items()))


async def test_killed_bookie_is_replaced_and_every_entry_has_qw_copies_again(four: Cluster) -> None:
    ledger_ids = await write_ledgers(four.client, ledgers=5, entries=10_000)  # 50,000 entries
    victim = four.bookies[1]
    await victim.kill_async()

    await eventually(lambda: nobody_uses(four, victim.bookie_id, ledger_ids), 240, "re-replication")
    for ledger_id in ledger_ids:
        metadata = await four.client.ledger_metadata(ledger_id)
        assert victim.bookie_id not in metadata.bookies()
        assert all(len(set(e)) == 3 for _, e in metadata.ensembles), "no bookie twice in an ensemble"
        await assert_fully_replicated(four, metadata, ledger_id, step=7)
    # The survivors' /metrics tell the same story: bytes re-replicated, nothing left marked
    # (the auditor refreshes its gauge every few seconds).
    survivors = [b for b in four.bookies if b is not victim]
    scraped = [await asyncio.to_thread(scrape, b.metrics_url) for b in survivors]
    assert sum(m.get("bookkeeper_replication_worker_REREPLICATE_BYTES_total", 0) for m in scraped) > 0

    async def auditor_counts_zero() -> bool:
        gauges = [
            m.get("bookkeeper_auditor_NUM_UNDER_REPLICATED_LEDGERS")
            for m in [await asyncio.to_thread(scrape, b.metrics_url) for b in survivors]
        ]
        return [g for g in gauges if g is not None] == [0]

    await eventually(auditor_counts_zero, 20, "auditor gauge at 0")
    # And through the client, without the dead bookie: every entry reads back exactly.
    for ledger_id in ledger_ids:
        reader = await four.client.open_ledger_no_recovery(ledger_id)
        entries = await reader.read(0, 9_999)
        assert [e.payload for e in entries] == [body(ledger_id, i) for i in range(10_000)]


def scrape(url: str) -> dict[str, float]:
    """The samples of a Prometheus text page, by name (labels ignored)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name.split("{")[0]] = float(value)
    return samples


def shell(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "magnetar", "shell", "-m", url, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )


async def test_decommissioned_bookie_is_drained(four: Cluster) -> None:
    ledger_ids = await write_ledgers(four.client, ledgers=2, entries=2_000)
    leaving = four.bookies[0]
    refused = await asyncio.to_thread(shell, four.url, "decommissionbookie", leaving.bookie_id)
    assert refused.returncode != 0
    assert "still running" in refused.stderr

    await leaving.stop_async()
    done = await asyncio.to_thread(shell, four.url, "decommissionbookie", leaving.bookie_id)
    assert done.returncode == 0, done.stderr
    assert "decommissioned" in done.stdout
    for ledger_id in ledger_ids:
        metadata = await four.client.ledger_metadata(ledger_id)
        assert leaving.bookie_id not in metadata.bookies()
        await assert_fully_replicated(four, metadata, ledger_id, step=1)


async def test_too_few_bookies_leaves_the_ledger_marked_until_one_joins(three: Cluster) -> None:
    (ledger_id,) = await write_ledgers(three.client, ledgers=1, entries=1_000)
    victim = three.bookies[2]
    await victim.kill_async()
    marks = UnderReplication(three.store)

    async def marked() -> bool:
        return ledger_id in await marks.ledgers()

    await eventually(marked, 60, "under-replication mark")
    await asyncio.sleep(3)  # workers try, find no spare bookie, and keep the mark
    assert await marks.ledgers() == [ledger_id]
    listed = await asyncio.to_thread(shell, three.url, "listunderreplicated")
    assert listed.returncode == 0, listed.stderr
    assert victim.bookie_id in listed.stdout
    logs = "".join(b.log_path.read_text() for b in three.bookies)
    assert "not enough" in logs.lower() or "NotEnoughBookies" in logs

    await three.add_bookie()  # a new bookie: now the copies have somewhere to go
    await eventually(lambda: nobody_uses(three, victim.bookie_id, [ledger_id]), 120, "re-replication")
    metadata = await three.client.ledger_metadata(ledger_id)
    await assert_fully_replicated(three, metadata, ledger_id, step=1)


async def test_bookie_back_within_the_grace_period_marks_nothing(
    zk_url: str, bookie_factory: BookieFactory
) -> None:
    settings = {**RECOVERY_SETTINGS, "lost_bookie_recovery_delay": 8}
    bookies = [bookie_factory(zk_url, start=False, **settings) for _ in range(4)]
    await asyncio.gather(*(b.start_async() for b in bookies))
    store = await open_store(zk_url)
    client = LedgerClient(store, LedgerClientConfig(ensemble_size=3, write_quorum=2, ack_quorum=2))
    try:
        await write_ledgers(client, ledgers=2, entries=500)
        bouncing = random.choice(bookies)
        await bouncing.kill_async()
        await bouncing.start_async()  # back well within eight seconds
        await asyncio.sleep(10)
        assert await UnderReplication(store).ledgers() == []
    finally:
        await client.close()
        await store.close()


async def test_bookie_back_after_the_grace_period_leaves_no_stale_marks(four: Cluster) -> None:
    ledger_ids = await write_ledgers(four.client, ledgers=3, entries=1_000)
    victim = four.bookies[3]
    await victim.kill_async()
    marks = UnderReplication(four.store)

    async def marked() -> bool:
        # The re-replication of three small ledgers can start and finish between two looks:
        # then the marks are gone already and no ensemble holds the victim any more.
        return bool(await marks.ledgers()) or await nobody_uses(four, victim.bookie_id, ledger_ids)

    await eventually(marked, 60, "under-replication marks (or their ledgers already recovered)")
    await victim.start_async()  # comes back while (or after) its ledgers are being recovered

    async def settled() -> bool:
        return not await marks.ledgers()

    await eventually(settled, 120, "marks cleared")
    # An audit now finds nothing to do: the counts are right, whichever copies were kept.
    await asyncio.to_thread(shell, four.url, "triggeraudit")
    await asyncio.sleep(3)
    assert await marks.ledgers() == []
    for ledger_id in ledger_ids:
        metadata = await four.client.ledger_metadata(ledger_id)
        await assert_fully_replicated(four, metadata, ledger_id, step=5)
