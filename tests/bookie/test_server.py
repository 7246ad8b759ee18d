"""The bookie over gRPC, in process: adds, reads, fencing, LAC, read-only mode, bad requests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import grpc
import pytest

from magnetar.bookie.journal import journal_files
from magnetar.bookie.metrics import MetricsServer
from magnetar.proto import bookie_pb2 as pb
from tests.bookie.helpers import entry, payload, reason_of, running


async def _rpc_error(awaitable: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await awaitable  # type: ignore[misc]
    return caught.value


async def test_add_then_read_round_trip(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        results = await client.add(*(entry(7, i) for i in range(10)))
        assert [(r.ledger_id, r.entry_id, r.reason) for r in results] == [(7, i, pb.OK) for i in range(10)]
        response = await client.read(7, 3)
        assert response.entry.payload == payload(7, 3)
        assert response.entry.digest == entry(7, 3).digest
        assert response.entry.last_add_confirmed == 2
        assert response.last_add_confirmed == 8  # piggybacked on entry 9


async def test_entries_survive_a_restart_on_the_same_dirs(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        await client.add(*(entry(1, i) for i in range(100)))
        await client.stub.WriteLac(pb.WriteLacRequest(ledger_id=1, last_add_confirmed=99))
    async with running(tmp_path) as (_, client):
        assert (await client.read(1, 42)).entry.payload == payload(1, 42)
        lac = await client.stub.ReadLac(pb.ReadLacRequest(ledger_id=1))
        assert lac.last_add_confirmed == 99


async def test_checkpoint_drops_old_journals_and_restart_still_has_everything(tmp_path: Path) -> None:
    async with running(tmp_path, journal_max_size_mb=1) as (server, client):
        big = b"z" * 100_000
        for i in range(30):  # 3 MB: several journal files
            await client.add(entry(2, i, data=big))
        assert len(journal_files(tmp_path / "journal")) >= 3
        await server.bookie.checkpoint()
        assert len(journal_files(tmp_path / "journal")) == 1
    async with running(tmp_path) as (_, client):
        assert (await client.read(2, 29)).entry.payload == big


async def test_digest_mismatch_is_refused_and_not_stored(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        damaged = entry(3, 0)
        damaged.payload = b"flipped" + damaged.payload[7:]
        results = await client.add(damaged, entry(3, 1))
        assert [r.reason for r in results] == [pb.DIGEST_MISMATCH, pb.OK]
        assert "3:0" in results[0].message
        error = await _rpc_error(client.read(3, 0))
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert reason_of(error) == "NO_SUCH_ENTRY"


async def test_unknown_ledger_and_unknown_entry(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        await client.add(entry(4, 0))
        error = await _rpc_error(client.read(5, 0))
        assert (error.code(), reason_of(error)) == (grpc.StatusCode.NOT_FOUND, "NO_SUCH_LEDGER")
        assert "ledger 5" in (error.details() or "")
        error = await _rpc_error(client.read(4, 1))
        assert (error.code(), reason_of(error)) == (grpc.StatusCode.NOT_FOUND, "NO_SUCH_ENTRY")
        assert "4:1" in (error.details() or "")
        error = await _rpc_error(client.stub.ReadLac(pb.ReadLacRequest(ledger_id=5)))
        assert reason_of(error) == "NO_SUCH_LEDGER"


async def test_fence_refuses_normal_adds_accepts_recovery_adds_and_survives_restart(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        await client.add(*(entry(6, i) for i in range(5)))
        fenced = await client.stub.Fence(pb.FenceRequest(ledger_id=6))
        assert (fenced.last_add_confirmed, fenced.last_entry_id) == (3, 4)
        (refused,) = await client.add(entry(6, 5))
        assert refused.reason == pb.LEDGER_FENCED
        assert "ledger 6" in refused.message
        (recovered,) = await client.add(entry(6, 5), recovery=True)
        assert recovered.reason == pb.OK
        # A fence on a ledger this bookie never saw still stops a later writer.
        empty = await client.stub.Fence(pb.FenceRequest(ledger_id=66))
        assert (empty.last_add_confirmed, empty.last_entry_id) == (-1, -1)
    async with running(tmp_path) as (_, client):
        assert [r.reason for r in await client.add(entry(6, 6), entry(66, 0))] == [pb.LEDGER_FENCED] * 2
        assert (await client.read(6, 5)).entry.payload == payload(6, 5)


async def test_explicit_lac_wakes_a_long_polling_reader(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        await client.add(entry(8, 0, lac=-1), entry(8, 1, lac=0))
        poll = asyncio.ensure_future(
            client.stub.ReadLac(pb.ReadLacRequest(ledger_id=8, previous_lac=0, long_poll_timeout_ms=10_000))
        )
        await asyncio.sleep(0.2)
        assert not poll.done()
        started = asyncio.get_running_loop().time()
        await client.stub.WriteLac(pb.WriteLacRequest(ledger_id=8, last_add_confirmed=1))
        assert (await poll).last_add_confirmed == 1
        assert asyncio.get_running_loop().time() - started < 2


async def test_long_poll_lac_returns_current_lac_on_timeout(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        await client.add(entry(9, 0, lac=-1))
        response = await client.stub.ReadLac(
            pb.ReadLacRequest(ledger_id=9, previous_lac=-1, long_poll_timeout_ms=100)
        )
        assert response.last_add_confirmed == -1


async def test_long_poll_read_waits_for_the_entry_to_be_confirmed(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        await client.add(entry(10, 0, lac=-1))
        poll = asyncio.ensure_future(client.read(10, 0, long_poll_ms=10_000))
        await asyncio.sleep(0.2)
        assert not poll.done()  # stored but not confirmed yet
        await client.add(entry(10, 1, lac=0))  # piggybacks LAC 0
        response = await poll
        assert response.entry.payload == payload(10, 0)
        error = await _rpc_error(client.read(10, 5, long_poll_ms=100))
        assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_read_only_bookie_refuses_adds_and_serves_reads(tmp_path: Path) -> None:
    async with running(tmp_path) as (server, client):
        await client.add(entry(11, 0))
        server.bookie.set_read_only(True, forced=True)
        (refused,) = await client.add(entry(11, 1))
        assert refused.reason == pb.BOOKIE_READ_ONLY
        assert (await client.read(11, 0)).entry.payload == payload(11, 0)
        assert (await client.stub.GetInfo(pb.GetInfoRequest())).read_only
        error = await _rpc_error(client.stub.WriteLac(pb.WriteLacRequest(ledger_id=11, last_add_confirmed=0)))
        assert reason_of(error) == "BOOKIE_READ_ONLY"
        server.bookie.set_read_only(False, forced=True)
        assert [r.reason for r in await client.add(entry(11, 1))] == [pb.OK]


async def test_is_ready_answers_200_while_writable_and_503_while_read_only(tmp_path: Path) -> None:
    """BookKeeper's readiness endpoint, which the operator's pods are probed by."""
    async with running(tmp_path) as (server, _client):
        http = MetricsServer(server.bookie, None, "127.0.0.1", 0)
        await http.start()
        url = f"http://127.0.0.1:{http.port}/api/v1/bookie/is_ready"
        try:
            async with aiohttp.ClientSession() as session:

                async def ready() -> tuple[int, str]:
                    async with session.get(url) as response:
                        return response.status, await response.text()

                assert await ready() == (200, "OK\n")
                server.bookie.set_read_only(True, forced=True)
                assert await ready() == (503, "read-only: not taking writes\n")
                server.bookie.set_read_only(False, forced=True)
                assert (await ready())[0] == 200
        finally:
            await http.stop()


async def test_bad_requests_get_invalid_request(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        (bad,) = await client.add(entry(-1, 0))
        assert bad.reason == pb.INVALID_REQUEST
        assert await client.add() == []  # an empty request is answered, not an error
        for call in (
            client.read(-1, 0),
            client.read(1, -5),
            client.stub.Fence(pb.FenceRequest(ledger_id=-2)),
            client.stub.WriteLac(pb.WriteLacRequest(ledger_id=1, last_add_confirmed=-7)),
        ):
            error = await _rpc_error(call)
            assert (error.code(), reason_of(error)) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")


async def test_many_concurrent_streams_get_their_results_in_order(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):

        async def stream(ledger_id: int) -> list[int]:
            requests = [
                pb.AddRequest(entries=[entry(ledger_id, i) for i in range(b, b + 20)])
                for b in range(0, 200, 20)
            ]
            call = client.stub.AddEntries(iter(requests))
            ids = []
            async for response in call:
                for result in response.results:
                    assert (result.ledger_id, result.reason) == (ledger_id, pb.OK)
                    ids.append(result.entry_id)
            return ids

        results = await asyncio.gather(*(stream(ledger) for ledger in range(100, 120)))
        assert all(ids == list(range(200)) for ids in results)
        assert (await client.read(113, 199)).entry.payload == payload(113, 199)


async def test_flipped_byte_in_entry_log_is_reported_never_served(tmp_path: Path) -> None:
    data = b"precious-bytes-" * 20
    async with running(tmp_path) as (_, client):
        await client.add(entry(12, 0, data=data), entry(12, 1))
    (log_file,) = (tmp_path / "ledgers").glob("*.log")
    raw = bytearray(log_file.read_bytes())
    raw[raw.index(data) + 40] ^= 0x08
    log_file.write_bytes(bytes(raw))
    async with running(tmp_path) as (_, client):
        error = await _rpc_error(client.read(12, 0))
        assert (error.code(), reason_of(error)) == (grpc.StatusCode.DATA_LOSS, "CORRUPT_ENTRY")
        assert "12:0" in (error.details() or "")
        assert (await client.read(12, 1)).entry.payload == payload(12, 1)  # neighbours still served


async def test_a_batch_read_serves_the_entries_named_in_order_and_says_why_it_skips_any(
    tmp_path: Path,
) -> None:
    data = b"precious-bytes-" * 20
    async with running(tmp_path) as (_, client):
        await client.add(*(entry(14, i) for i in range(10)), entry(14, 10, data=data), entry(14, 11))
    (log_file,) = (tmp_path / "ledgers").glob("*.log")
    raw = bytearray(log_file.read_bytes())
    raw[raw.index(data) + 40] ^= 0x08
    log_file.write_bytes(bytes(raw))
    async with running(tmp_path) as (_, client):
        asked = [9, 3, 10, 42, 11, 0]
        response = await client.stub.ReadEntries(pb.ReadEntriesRequest(ledger_id=14, entry_ids=asked))
        assert [(e.entry_id, e.payload) for e in response.entries] == [
            (i, payload(14, i)) for i in (9, 3, 11, 0)
        ]
        assert all(e.digest == entry(14, e.entry_id).digest for e in response.entries)
        assert [(f.entry_id, pb.Reason.Name(f.reason)) for f in response.failed] == [
            (10, "CORRUPT_ENTRY"),
            (42, "NO_SUCH_ENTRY"),
        ]
        assert "14:42" in response.failed[1].message
        assert response.last_add_confirmed == 10  # piggybacked on entry 11
        unknown = await client.stub.ReadEntries(pb.ReadEntriesRequest(ledger_id=15, entry_ids=[0]))
        assert [pb.Reason.Name(f.reason) for f in unknown.failed] == ["NO_SUCH_LEDGER"]


async def test_a_batch_read_stops_at_its_byte_limit_and_always_serves_one_entry(tmp_path: Path) -> None:
    big = b"b" * 10_000
    async with running(tmp_path) as (_, client):
        await client.add(*(entry(16, i, data=big) for i in range(20)))
        ids = list(range(20))
        response = await client.stub.ReadEntries(
            pb.ReadEntriesRequest(ledger_id=16, entry_ids=ids, max_bytes=35_000)
        )
        assert [e.entry_id for e in response.entries] == [0, 1, 2, 3]  # 4 records of 10,036 bytes pass 35,000
        one = await client.stub.ReadEntries(pb.ReadEntriesRequest(ledger_id=16, entry_ids=ids, max_bytes=1))
        assert [e.entry_id for e in one.entries] == [0]
        assert not one.failed


async def test_a_bad_batch_read_gets_invalid_request_and_a_wrong_key_is_refused(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        await client.add(entry(17, 0), key=b"k" * 20)
        for request in (
            pb.ReadEntriesRequest(ledger_id=-1, entry_ids=[0]),
            pb.ReadEntriesRequest(ledger_id=17, entry_ids=[0, -3]),
        ):
            error = await _rpc_error(client.stub.ReadEntries(request))
            assert (error.code(), reason_of(error)) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
        error = await _rpc_error(
            client.stub.ReadEntries(pb.ReadEntriesRequest(ledger_id=17, entry_ids=[0], master_key=b"x" * 20))
        )
        assert (error.code(), reason_of(error)) == (grpc.StatusCode.PERMISSION_DENIED, "UNAUTHORIZED_ACCESS")
        empty = await client.stub.ReadEntries(pb.ReadEntriesRequest(ledger_id=17))
        assert not empty.entries
        assert not empty.failed
