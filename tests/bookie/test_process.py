"""Real bookie processes: kill -9 loses nothing acknowledged; SIGTERM exits cleanly."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import grpc
import pytest

from magnetar.proto import bookie_pb2 as pb
from tests.bookie.conftest import BookieFactory
from tests.bookie.helpers import Client, entry, payload, reason_of
from tests.metrics import Histogram, histogram, scrape


async def test_kill_9_then_restart_keeps_every_acknowledged_entry_and_the_fence(
    bookie_factory: BookieFactory,
) -> None:
    # A long checkpoint interval: after the kill, everything must come back from the journal.
    bookie = await bookie_factory.start_async(flush_interval=600_000)
    client = Client(bookie.address)
    acked: list[int] = []
    requests = [pb.AddRequest(entries=[entry(1, i) for i in range(b, b + 50)]) for b in range(0, 2000, 50)]
    async for response in client.stub.AddEntries(iter(requests)):
        acked += [r.entry_id for r in response.results if r.reason == pb.OK]
    assert acked == list(range(2000))
    await client.stub.Fence(pb.FenceRequest(ledger_id=1))
    await client.add(*(entry(2, i) for i in range(42)))  # piggybacked LAC 40
    await client.stub.WriteLac(pb.WriteLacRequest(ledger_id=2, last_add_confirmed=41))
    await client.close()

    port = bookie.port
    await bookie.kill_async()
    await bookie.start_async()
    assert bookie.port == port

    client = Client(bookie.address)
    try:
        for entry_id in (0, 1, 999, 1998, 1999):
            assert (await client.read(1, entry_id)).entry.payload == payload(1, entry_id)
        (refused,) = await client.add(entry(1, 2000))
        assert refused.reason == pb.LEDGER_FENCED
        lac = await client.stub.ReadLac(pb.ReadLacRequest(ledger_id=2))
        assert lac.last_add_confirmed == 41
    finally:
        await client.close()
    assert await bookie.stop_async() == 0


async def test_sigterm_shuts_down_cleanly_and_restart_serves_the_data(bookie_factory: BookieFactory) -> None:
    bookie = await bookie_factory.start_async()
    client = Client(bookie.address)
    await client.add(*(entry(3, i) for i in range(10)))
    await client.close()
    assert await bookie.stop_async() == 0
    assert "bookie storage open" in bookie.log_path.read_text()
    await bookie.start_async()
    client = Client(bookie.address)
    try:
        assert (await client.read(3, 9)).entry.payload == payload(3, 9)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.read(3, 10)
        assert reason_of(caught.value) == "NO_SUCH_ENTRY"
    finally:
        await client.close()


def test_cli_help_shows_examples() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "magnetar", "bookie", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "magnetar bookie --config bookie.yaml" in out
    assert "--metadata-service-uri" in out


def test_cli_rejects_an_unknown_setting_clearly() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "magnetar", "bookie", "--port", "0", "--set", "no_such_setting=1"],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "no_such_setting" in result.stderr


async def test_metrics_take_an_add_apart_into_request_journal_and_fsync(
    bookie_factory: BookieFactory,
) -> None:
    bookie = await bookie_factory.start_async()
    names = ("bookkeeper_server_ADD_ENTRY_REQUEST_seconds", "bookie_journal_JOURNAL_ADD_ENTRY_seconds",
             "bookie_journal_JOURNAL_SYNC_seconds")  # fmt: skip

    async def histograms() -> list[Histogram]:
        text = await asyncio.to_thread(scrape, bookie.metrics_url)
        return [histogram(text, name) for name in names]

    client = Client(bookie.address)
    try:
        # The first add of a ledger journals its master key as a record of its own, which no
        # request's time contains: measured from after it.
        await client.add(entry(4, 0))
        before = await histograms()
        assert before[1].count == 2, "the master key and the first add, each a journal record"
        for i in range(5):
            await client.add(*(entry(4, 1 + i * 10 + j) for j in range(10)))
    finally:
        await client.close()
    request, record, sync = (now.since(then) for now, then in zip(await histograms(), before, strict=True))
    assert request.count == 5  # every add request observed once
    assert record.count == 5  # ten entries of one request, one journal record
    assert 1 <= sync.count <= record.count  # group commit: a sync serves one record or more
    # Each is part of the one before: a request waits for its record, a record for its group's sync.
    assert request.mean >= record.mean >= sync.mean > 0
    assert await bookie.stop_async() == 0
