"""The bookie's framed add port, in process: answers in order and durable, group commit across
connections, and frames it cannot read answered with an error before the connection closes,
the bookie serving on."""

from __future__ import annotations

import asyncio
from pathlib import Path

from magnetar.bookie.frames import HEADER, FrameReader, frame
from magnetar.proto import bookie_pb2 as pb
from tests.bookie.helpers import entry, payload, running


class FramedClient:
    """A bare client of the add port: frames written and read by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._frames = FrameReader()
        self._responses: list[pb.AddResponse] = []

    @classmethod
    async def connect(cls, address: str) -> FramedClient:
        host, _, port = address.rpartition(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    def send(self, *requests: pb.AddRequest) -> None:
        self._writer.write(b"".join(frame(r.SerializeToString()) for r in requests))

    def send_raw(self, data: bytes) -> None:
        self._writer.write(data)

    async def responses(self, count: int) -> list[pb.AddResponse]:
        while len(self._responses) < count:
            data = await asyncio.wait_for(self._reader.read(65536), 10)
            assert data, f"connection closed after {len(self._responses)} of {count} responses"
            self._responses += [pb.AddResponse.FromString(p) for p in self._frames.feed(data)]
        taken, self._responses = self._responses[:count], self._responses[count:]
        return taken

    async def closed_by_bookie(self) -> bool:
        return await asyncio.wait_for(self._reader.read(), 10) == b""

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()


def request(ledger_id: int, *entry_ids: int) -> pb.AddRequest:
    return pb.AddRequest(entries=[entry(ledger_id, i) for i in entry_ids], master_keys={ledger_id: b""})


async def test_adds_are_answered_in_order_and_readable(tmp_path: Path) -> None:
    async with running(tmp_path) as (server, grpc_client):
        assert server.add_address
        client = await FramedClient.connect(server.add_address)
        client.send(*(request(5, 2 * i, 2 * i + 1) for i in range(50)))
        responses = await client.responses(50)
        assert [(r.ledger_id, r.entry_id, r.reason) for resp in responses for r in resp.results] == [
            (5, i, pb.OK) for i in range(100)
        ]
        assert (await grpc_client.read(5, 77)).entry.payload == payload(5, 77)
        await client.close()


async def test_connections_added_to_at_once_each_get_their_own_answers(tmp_path: Path) -> None:
    async with running(tmp_path) as (server, _):
        clients = [await FramedClient.connect(server.add_address) for _ in range(4)]
        for ledger_id, client in enumerate(clients, start=10):
            client.send(*(request(ledger_id, i) for i in range(30)))
        for ledger_id, client in enumerate(clients, start=10):
            answered = [r for resp in await client.responses(30) for r in resp.results]
            assert [(r.ledger_id, r.entry_id, r.reason) for r in answered] == [
                (ledger_id, i, pb.OK) for i in range(30)
            ]
            await client.close()


async def test_a_refused_entry_is_answered_with_its_reason(tmp_path: Path) -> None:
    async with running(tmp_path) as (server, _):
        client = await FramedClient.connect(server.add_address)
        damaged = entry(3, 0)
        damaged.payload = b"flipped" + damaged.payload[7:]
        client.send(pb.AddRequest(entries=[damaged]), request(3, 1))
        first, second = await client.responses(2)
        assert [r.reason for r in first.results] == [pb.DIGEST_MISMATCH]
        assert [r.reason for r in second.results] == [pb.OK]
        await client.close()


async def test_an_undecodable_frame_gets_an_error_and_the_bookie_serves_on(tmp_path: Path) -> None:
    async with running(tmp_path) as (server, grpc_client):
        client = await FramedClient.connect(server.add_address)
        client.send(request(8, 0, 1))
        assert [r.reason for r in (await client.responses(1))[0].results] == [pb.OK, pb.OK]
        client.send_raw(frame(b"\xff\xff\xff\xff not a protobuf message"))
        (refusal,) = await client.responses(1)
        assert "cannot decode AddRequest" in refusal.error
        assert await client.closed_by_bookie()
        # what was acknowledged before stays, and another connection adds as before
        assert (await grpc_client.read(8, 1)).entry.payload == payload(8, 1)
        again = await FramedClient.connect(server.add_address)
        again.send(request(8, 2))
        assert [r.reason for r in (await again.responses(1))[0].results] == [pb.OK]
        await again.close()


async def test_a_frame_over_the_limit_is_refused_before_its_bytes_arrive(tmp_path: Path) -> None:
    async with running(tmp_path) as (server, _):
        client = await FramedClient.connect(server.add_address)
        client.send_raw(HEADER.pack(2**31))
        (refusal,) = await client.responses(1)
        assert "over the limit" in refusal.error
        assert await client.closed_by_bookie()


async def test_the_add_port_can_be_turned_off(tmp_path: Path) -> None:
    async with running(tmp_path, framed_adds_enabled=False) as (server, grpc_client):
        assert server.add_address == ""
        assert [r.reason for r in await grpc_client.add(entry(4, 0))] == [pb.OK]
