"""Bookie integrity as BookKeeper's: what any caller of a bookie's port may not do.

The ledger's master key is checked on add, fence, explicit LAC and recovery reads; an entry the
bookie stores is never replaced by another payload; a LAC never points past the stored entries.
Each refusal leaves every acknowledged entry readable as it was, across a restart.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.bookie.client.ledger_metadata import LedgerMetadata
from magnetar.bookie.digest import master_key
from magnetar.common.metadata import open_store
from magnetar.proto import bookie_pb2 as pb
from tests.bookie.helpers import entry, payload, reason_of, running

KEY = master_key(b"the writer's password")
GUESS = master_key(b"")  # what a caller who does not know the password would try first


async def _refused(call: object) -> tuple[grpc.StatusCode, str, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return caught.value.code(), reason_of(caught.value), caught.value.details() or ""


async def test_a_wrong_master_key_can_add_fence_or_move_the_lac_of_no_ledger(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        assert [r.reason for r in await client.add(*(entry(1, i) for i in range(5)), key=KEY)] == [pb.OK] * 5

        (forged,) = await client.add(entry(1, 5, data=b"forged"), key=GUESS)
        assert forged.reason == pb.UNAUTHORIZED_ACCESS
        assert "master key" in forged.message
        code, reason, _ = await _refused(client.stub.Fence(pb.FenceRequest(ledger_id=1, master_key=GUESS)))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "UNAUTHORIZED_ACCESS")
        code, reason, _ = await _refused(
            client.stub.WriteLac(pb.WriteLacRequest(ledger_id=1, last_add_confirmed=4, master_key=GUESS))
        )
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "UNAUTHORIZED_ACCESS")
        code, reason, _ = await _refused(client.read(1, 0, key=GUESS))  # a recovery read
        assert reason == "UNAUTHORIZED_ACCESS"

        # None of it happened: the ledger is not fenced, its writer goes on, plain reads work.
        assert [r.reason for r in await client.add(entry(1, 5), key=KEY)] == [pb.OK]
        assert (await client.read(1, 5)).entry.payload == payload(1, 5)
        lac = await client.stub.ReadLac(pb.ReadLacRequest(ledger_id=1))
        assert lac.last_add_confirmed == 4  # piggybacked on entry 5; the forged entry 5 was not stored


async def test_the_master_key_survives_a_restart_from_journal_and_from_checkpoint(tmp_path: Path) -> None:
    async with running(tmp_path, flush_interval=600_000) as (_, client):
        await client.add(entry(2, 0), key=KEY)  # the key is in the journal only
    async with running(tmp_path) as (server, client):
        (refused,) = await client.add(entry(2, 1), key=GUESS)
        assert refused.reason == pb.UNAUTHORIZED_ACCESS
        await server.bookie.checkpoint()  # now in the checkpoint, and the journal is dropped
    async with running(tmp_path) as (_, client):
        (refused,) = await client.add(entry(2, 1), key=GUESS)
        assert refused.reason == pb.UNAUTHORIZED_ACCESS
        assert [r.reason for r in await client.add(entry(2, 1), key=KEY)] == [pb.OK]


async def test_a_fence_records_the_key_of_a_ledger_the_bookie_has_not_seen(tmp_path: Path) -> None:
    # Recovery fences every bookie of the ensemble, including one that holds no entry yet.
    async with running(tmp_path) as (_, client):
        fenced = await client.stub.Fence(pb.FenceRequest(ledger_id=3, master_key=KEY))
        assert (fenced.last_add_confirmed, fenced.last_entry_id) == (-1, -1)
        (recovered,) = await client.add(entry(3, 0), recovery=True, key=KEY)
        assert recovered.reason == pb.OK
        (refused,) = await client.add(entry(3, 1), recovery=True, key=GUESS)
        assert refused.reason == pb.UNAUTHORIZED_ACCESS


async def test_an_acknowledged_entry_is_never_replaced(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        await client.add(*(entry(4, i) for i in range(3)), key=KEY)
        # Even the key holder cannot replace it; the same bytes again are fine (recovery adds).
        (replaced,) = await client.add(entry(4, 1, data=b"something else"), key=KEY)
        assert replaced.reason == pb.DUPLICATE_ENTRY_ID
        assert "4:1" in replaced.message
        again = await client.add(entry(4, 1), entry(4, 2), entry(4, 3), recovery=True, key=KEY)
        assert [r.reason for r in again] == [pb.OK, pb.OK, pb.OK]
        assert (await client.read(4, 1)).entry.payload == payload(4, 1)
    async with running(tmp_path) as (_, client):  # and so it stays once replayed
        assert (await client.read(4, 1)).entry.payload == payload(4, 1)


async def test_a_lac_past_the_stored_entries_is_refused(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        await client.add(*(entry(5, i) for i in range(5)), key=KEY)
        code, reason, details = await _refused(
            client.stub.WriteLac(pb.WriteLacRequest(ledger_id=5, last_add_confirmed=10**12, master_key=KEY))
        )
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
        assert "past the last entry" in details
        await client.stub.WriteLac(pb.WriteLacRequest(ledger_id=5, last_add_confirmed=4, master_key=KEY))
        assert (await client.stub.ReadLac(pb.ReadLacRequest(ledger_id=5))).last_add_confirmed == 4
        code, reason, _ = await _refused(
            client.stub.WriteLac(pb.WriteLacRequest(ledger_id=6, last_add_confirmed=0, master_key=KEY))
        )
        assert reason == "NO_SUCH_LEDGER"
        # A piggybacked LAC must lie before its own entry.
        (bad,) = await client.add(entry(5, 5, lac=10**12), key=KEY)
        assert bad.reason == pb.INVALID_REQUEST
        assert (await client.stub.ReadLac(pb.ReadLacRequest(ledger_id=5))).last_add_confirmed == 4


async def test_recovery_does_not_trust_a_lac_that_no_stored_entry_backs(
    tmp_path: Path, memory_url: str
) -> None:
    settings = {"metadata_service_uri": memory_url, "auto_recovery_daemon_enabled": False}
    async with (
        running(tmp_path / "b0", **settings) as (first, _),
        running(tmp_path / "b1", **settings) as (_, _),
    ):
        store = await open_store(memory_url)
        client = LedgerClient(store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))
        try:
            writer = await client.create_ledger()
            other = await client.create_ledger()
            # Without a password given, each ledger gets its own random one: no key to guess.
            passwords = {h.metadata.password for h in (writer, other)}
            assert len(passwords) == 2
            assert all(len(p) == 16 for p in passwords)
            for i in range(10):
                await writer.add_entry(payload(9, i))
            # A bookie that took a forged LAC before bookies refused them (or that lies).
            first.bookie.storage.set_lac(writer.ledger_id, 10**12)
            recovered = await client.open_ledger(writer.ledger_id)
            assert recovered.last_add_confirmed == 9
            assert [e.payload for e in await recovered.read(0, 9)] == [payload(9, i) for i in range(10)]
        finally:
            await client.close()
            await store.close()


def test_the_password_is_kept_in_the_ledger_metadata_and_out_of_logs() -> None:
    metadata = [
        LedgerMetadata.decode(LedgerMetadata(1, 1, 1, ((0, ("b",)),), password=p).encode())
        for p in (b"", b"secret")
    ]
    assert [m.password for m in metadata] == [b"", b"secret"]
    assert metadata[1].master_key == master_key(b"secret") != metadata[0].master_key
    assert "secret" not in repr(metadata[1])
