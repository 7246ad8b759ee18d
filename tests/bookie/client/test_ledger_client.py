"""The ledger client against real bookie processes and a real ZooKeeper: crashes, fencing,
recovery and corruption, with E=3, Qw=2, Qa=2 unless a test needs otherwise.

What a user of the storage layer relies on, and what these tests hold it to: an entry that was
acknowledged is readable, whatever crashed since; a deposed writer cannot add; a bookie never
serves bytes that fail their checksum.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from magnetar.bookie.client import (
    LedgerClient,
    LedgerClientConfig,
    LedgerClosedError,
    LedgerFencedError,
    LedgerState,
    NotEnoughBookiesError,
    ReadPastLacError,
)
from magnetar.common.metadata import MetadataStore, open_store
from magnetar.proto import bookie_pb2 as pb
from magnetar.proto import bookie_pb2_grpc as pb_grpc
from tests.bookie.client.writer_process import payload
from tests.bookie.conftest import BookieFactory, BookieProcess

pytestmark = [pytest.mark.zookeeper]

WRITER = Path(__file__).with_name("writer_process.py")


@dataclass
class Cluster:
    url: str
    store: MetadataStore
    client: LedgerClient
    bookies: list[BookieProcess]

    def by_id(self, bookie_id: str) -> BookieProcess:
        return next(b for b in self.bookies if b.bookie_id == bookie_id)


def start_bookies(factory: BookieFactory, url: str, count: int) -> list[BookieProcess]:
    """Start ``count`` bookie processes at once (each takes about a second to start)."""
    bookies = [factory(url, start=False) for _ in range(count)]
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda b: b.start(), bookies))


@pytest.fixture
async def cluster(zk_url: str, bookie_factory: BookieFactory) -> AsyncIterator[Cluster]:
    bookies = await asyncio.to_thread(start_bookies, bookie_factory, zk_url, 4)
    store = await open_store(zk_url)
    client = LedgerClient(
        store, LedgerClientConfig(ensemble_size=3, write_quorum=2, ack_quorum=2, rpc_timeout_s=10)
    )
    yield Cluster(zk_url, store, client, bookies)
    await client.close()
    await store.close()


async def read_back(client: LedgerClient, ledger_id: int, last: int) -> None:
    """Every entry 0..last reads back with exactly the bytes written."""
    reader = await client.open_ledger_no_recovery(ledger_id)
    for first in range(0, last + 1, 1000):
        entries = await reader.read(first, min(first + 999, last))
        for entry in entries:
            assert entry.payload == payload(entry.entry_id), f"entry {entry.entry_id} differs"
        assert [e.entry_id for e in entries] == list(range(first, min(first + 999, last) + 1))


async def test_bookie_killed_mid_stream_writes_continue_through_ensemble_change(cluster: Cluster) -> None:
    writer = await cluster.client.create_ledger()
    victim = cluster.by_id(writer.metadata.ensembles[0][1][0])
    acked: list[int] = []
    window: list[asyncio.Future[int]] = []
    for entry_id in range(10_000):
        if entry_id == 3_000:
            await victim.kill_async()  # kill -9, with adds in flight
        window.append(writer.add_entry_async(payload(entry_id)))
        if len(window) == 200:
            acked += [await f for f in window]
            window.clear()
    acked += [await f for f in window]
    assert acked == list(range(10_000)), "adds complete in order, none failed"

    ensembles = writer.metadata.ensembles
    assert len(ensembles) >= 2, "the dead bookie was replaced"
    assert victim.bookie_id not in ensembles[-1][1]
    await writer.close()
    # With one bookie of the first ensemble dead, every entry is still read (from its replica).
    await read_back(cluster.client, writer.ledger_id, 9_999)


async def test_a_rolling_restart_of_bookies_leaves_a_long_lived_writer_writing(cluster: Cluster) -> None:
    # Each bookie restarted in turn, as an operator rolls them: a bookie that failed once and came
    # back is a replacement like any other (with 4 bookies and E=3 the second failure has no
    # other candidate); a writer that kept it out for good stopped with NotEnoughBookies.
    writer = await cluster.client.create_ledger()
    acked: list[int] = []
    entry_id = 0

    async def write(count: int) -> None:
        nonlocal entry_id
        futures = [writer.add_entry_async(payload(entry_id + i)) for i in range(count)]
        entry_id += count
        acked.extend([await f for f in futures])

    await write(500)
    for _ in range(2):
        victim = cluster.by_id(writer.metadata.ensembles[-1][1][0])
        await victim.kill_async()
        await write(500)  # through the ensemble change
        assert victim.bookie_id not in writer.metadata.ensembles[-1][1]
        await victim.start_async()  # back, registered again
        await asyncio.sleep(0.5)
    await write(500)
    assert acked == list(range(entry_id)), "adds complete in order, none failed"
    await writer.close()
    await read_back(cluster.client, writer.ledger_id, entry_id - 1)


async def test_a_replacement_that_does_not_connect_is_passed_over_not_written_to(cluster: Cluster) -> None:
    # A frozen bookie (SIGSTOP: its port accepts, nothing answers), like a pod's old address, is
    # the only replacement there is (4 bookies, E=3). Adds sent to it at once waited forever; now
    # the writer waits for the connection, passes over it, and the adds fail with a clear error.
    client = LedgerClient(
        cluster.store,
        LedgerClientConfig(
            ensemble_size=3, write_quorum=2, ack_quorum=2, rpc_timeout_s=10, connect_timeout_s=2
        ),
    )
    try:
        writer = await client.create_ledger()
        assert [await writer.add_entry_async(payload(i)) for i in range(100)] == list(range(100))
        (spare,) = [b for b in cluster.bookies if b.bookie_id not in writer.metadata.ensembles[0][1]]
        assert spare.pid is not None
        os.kill(spare.pid, signal.SIGSTOP)
        try:
            await cluster.by_id(writer.metadata.ensembles[0][1][0]).kill_async()
            adds = [writer.add_entry_async(payload(i)) for i in range(100, 200)]
            with pytest.raises(NotEnoughBookiesError):
                await asyncio.wait_for(asyncio.gather(*adds), 30)
            assert spare.bookie_id not in writer.metadata.ensembles[-1][1], "nothing was written to it"
        finally:
            os.kill(spare.pid, signal.SIGCONT)
    finally:
        await client.close()


def write_then_kill(url: str, min_acks: int) -> tuple[int, int]:
    """Run the writer process until it has ``min_acks`` acknowledged, kill -9 it with adds in
    flight, and return (ledger id, last entry it reported acknowledged)."""
    process = subprocess.Popen(
        [sys.executable, str(WRITER), url, "100000"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        ledger_id = int(process.stdout.readline().split()[1])
        last_acked = -1
        for line in process.stdout:
            if line.startswith("acked"):
                last_acked = int(line.split()[1])
                if last_acked >= min_acks:
                    break
        process.kill()
        process.wait()
        # What it printed after we stopped reading was acknowledged too: count it.
        for line in process.stdout:
            if line.startswith("acked"):
                last_acked = max(last_acked, int(line.split()[1]))
        return ledger_id, last_acked
    finally:
        process.kill()
        process.wait()


async def test_writer_killed_recovery_closes_at_or_past_last_acked(cluster: Cluster) -> None:
    ledger_id, last_acked = await asyncio.to_thread(write_then_kill, cluster.url, 2_000)
    assert last_acked >= 2_000

    reader = await cluster.client.open_ledger(ledger_id)  # fences, recovers, closes
    metadata = await cluster.client.ledger_metadata(ledger_id)
    assert metadata.state is LedgerState.CLOSED
    assert metadata.last_entry_id >= last_acked
    assert reader.last_add_confirmed == metadata.last_entry_id
    await read_back(cluster.client, ledger_id, metadata.last_entry_id)


async def test_second_writer_fences_the_first(cluster: Cluster) -> None:
    first = await cluster.client.create_ledger()
    for entry_id in range(100):
        await first.add_entry(payload(entry_id))
    other_store = await open_store(cluster.url)
    other = LedgerClient(other_store, LedgerClientConfig(ensemble_size=3, write_quorum=2, ack_quorum=2))
    try:
        recovered = await other.open_ledger(first.ledger_id)
        assert recovered.last_add_confirmed == 99
        with pytest.raises((LedgerFencedError, LedgerClosedError)):
            await first.add_entry(payload(100))
        entries = await recovered.read(0, 99)
        assert [e.payload for e in entries] == [payload(i) for i in range(100)]
    finally:
        await other.close()
        await other_store.close()


async def test_closed_ledger_rejects_adds_and_reads_stop_at_lac(cluster: Cluster) -> None:
    writer = await cluster.client.create_ledger()
    for entry_id in range(10):
        await writer.add_entry(payload(entry_id))
    tailing = await cluster.client.open_ledger_no_recovery(writer.ledger_id)
    with pytest.raises(ReadPastLacError):
        await tailing.read(0, 50)
    await writer.close()
    with pytest.raises(LedgerClosedError):
        await writer.add_entry(b"too late")


async def test_a_range_larger_than_a_bookies_answer_reads_whole_and_in_order(cluster: Cluster) -> None:
    """A bookie answers a batch read with at most 16 MiB of entries, so the reader must put a
    range of big entries together from several answers: whole, in order, nothing misplaced."""
    writer = await cluster.client.create_ledger(2, 2, 2)
    big = [bytes([e]) * (2 * 1024 * 1024) for e in range(18)]  # 18 MiB on each bookie
    await asyncio.gather(*(writer.add_entry_async(data) for data in big))
    await writer.close()
    reader = await cluster.client.open_ledger(writer.ledger_id)
    entries = await reader.read(0, 17)
    assert [e.entry_id for e in entries] == list(range(18))
    assert all(e.payload == data for e, data in zip(entries, big, strict=True))


async def test_restarted_bookies_serve_acknowledged_entries_from_the_journal(cluster: Cluster) -> None:
    writer = await cluster.client.create_ledger(3, 3, 3)  # every entry on all three
    for entry_id in range(500):
        await writer.add_entry(payload(entry_id))
    await writer.close()
    ensemble = [cluster.by_id(b) for b in writer.metadata.ensembles[0][1]]
    # kill -9 before the entry logs were flushed (flush_interval is 10 s): only the journal has them.
    await asyncio.gather(*(b.kill_async() for b in ensemble))
    await asyncio.gather(*(b.start_async() for b in ensemble))
    await read_back(cluster.client, writer.ledger_id, 499)


async def test_flipped_byte_in_entry_log_is_detected_and_replica_read(cluster: Cluster) -> None:
    writer = await cluster.client.create_ledger(2, 2, 2)
    for entry_id in range(200):
        await writer.add_entry(payload(entry_id))
    await writer.close()
    victim = cluster.by_id(writer.metadata.ensembles[0][1][0])
    await victim.stop_async()  # graceful: entry logs flushed, journal checkpointed
    marker = payload(150)[:20]
    flipped = 0
    for log_file in victim.ledger_dir.rglob("*.log"):
        data = bytearray(log_file.read_bytes())
        at = data.find(marker)
        if at >= 0:
            data[at + 3] ^= 0x01
            log_file.write_bytes(bytes(data))
            flipped += 1
    assert flipped == 1, "the entry's bytes were found in one entry log"
    await victim.start_async()

    # The corrupted bookie reports the entry as corrupt rather than serving it...
    async with grpc.aio.insecure_channel(victim.address) as channel:
        stub = pb_grpc.BookieStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.ReadEntry(pb.ReadRequest(ledger_id=writer.ledger_id, entry_id=150))
        assert raised.value.code() == grpc.StatusCode.DATA_LOSS
        assert dict(raised.value.trailing_metadata() or ()).get("magnetar-reason") == "CORRUPT_ENTRY"
        healthy = await stub.ReadEntry(pb.ReadRequest(ledger_id=writer.ledger_id, entry_id=149))
        assert healthy.entry.payload == payload(149)
    # ...and the client reads the other replica.
    await read_back(cluster.client, writer.ledger_id, 199)


async def test_ensemble_larger_than_the_cluster_is_a_clear_error(cluster: Cluster) -> None:
    with pytest.raises(NotEnoughBookiesError, match="5"):
        await cluster.client.create_ledger(5, 2, 2)
