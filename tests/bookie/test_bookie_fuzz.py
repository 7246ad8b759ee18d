"""Garbage on a bookie's gRPC port: seeded mutations of valid requests and random bytes,
a few hundred, to every method. Each gets a specific answer (never UNKNOWN or INTERNAL), nothing
is logged as an error, and afterwards the ledger written before is intact and still writable."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import grpc
import pytest

from magnetar.bookie.digest import master_key
from magnetar.proto import bookie_pb2 as pb
from tests.bookie.helpers import entry, payload, running

KEY = master_key(b"fuzz")
SEED = 22
CASES = 300
#: what a bad request may get; UNKNOWN, INTERNAL or DATA_LOSS would mean the bookie did not know why
ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.DEADLINE_EXCEEDED,  # a long poll that was asked to wait
}
SERVICE = "/magnetar.bookie.v1.Bookie/"


def _seeds() -> dict[str, bytes]:
    """A valid request per method, aimed at the ledger under test, without its master key."""
    forged = entry(1, 20, data=b"forged")
    return {
        "AddEntries": pb.AddRequest(entries=[forged, entry(1, 3, data=b"replaced")]).SerializeToString(),
        "ReadEntry": pb.ReadRequest(ledger_id=1, entry_id=3, master_key=b"x" * 20).SerializeToString(),
        "ReadLac": pb.ReadLacRequest(ledger_id=1, previous_lac=5).SerializeToString(),
        "WriteLac": pb.WriteLacRequest(ledger_id=1, last_add_confirmed=10**12).SerializeToString(),
        "Fence": pb.FenceRequest(ledger_id=1, master_key=master_key(b"")).SerializeToString(),
        "GetInfo": pb.GetInfoRequest().SerializeToString(),
    }


def _mutate(rng: random.Random, data: bytes) -> bytes:
    kind = rng.randrange(4)
    if kind == 0 or not data:
        return rng.randbytes(rng.randrange(1, 64))
    mutable = bytearray(data)
    if kind == 1:
        for _ in range(rng.randrange(1, 4)):
            mutable[rng.randrange(len(mutable))] = rng.randrange(256)
    elif kind == 2:
        del mutable[rng.randrange(len(mutable)) :]
    else:
        at = rng.randrange(len(mutable) + 1)
        mutable[at:at] = rng.randbytes(rng.randrange(1, 16))
    return bytes(mutable)


async def _call(channel: grpc.aio.Channel, method: str, body: bytes) -> grpc.StatusCode:
    try:
        if method == "AddEntries":
            stream = channel.stream_stream(SERVICE + method)
            call = stream(iter([body]), timeout=2)
            async for _ in call:
                pass
        else:
            await channel.unary_unary(SERVICE + method)(body, timeout=0.5)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def test_garbage_gets_specific_answers_and_changes_no_acknowledged_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    rng = random.Random(SEED)
    seeds = _seeds()
    async with running(tmp_path) as (_, client):
        assert [r.reason for r in await client.add(*(entry(1, i) for i in range(20)), key=KEY)] == [
            pb.OK
        ] * 20
        answers: dict[grpc.StatusCode, int] = {}
        for _ in range(CASES):
            method = rng.choice(sorted(seeds))
            code = await _call(client.channel, method, _mutate(rng, seeds[method]))
            answers[code] = answers.get(code, 0) + 1
            assert code in ALLOWED, f"{method}: {code}"
        assert answers.get(grpc.StatusCode.INVALID_ARGUMENT, 0) > CASES // 10, answers

        for entry_id in range(20):
            assert (await client.read(1, entry_id)).entry.payload == payload(1, entry_id)
        assert [r.reason for r in await client.add(entry(1, 20), key=KEY)] == [pb.OK]  # not fenced
        assert (await client.stub.ReadLac(pb.ReadLacRequest(ledger_id=1))).last_add_confirmed == 19
    problems = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not problems, [r.getMessage() for r in problems]
