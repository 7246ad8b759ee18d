"""Malformed input over a raw socket: an ERROR or a clean close, never a crash; other
connections (here, the official client's) carry on."""

from __future__ import annotations

import socket
import struct

import pulsar

from magnetar.broker.protocol import commands
from magnetar.broker.protocol.frames import encode, parse_frame, payload_section
from magnetar.proto import PulsarApi_pb2 as api
from tests.broker.e2e.conftest import Standalone

T = commands.T


class RawConnection:
    def __init__(self, standalone: Standalone) -> None:
        self.sock = socket.create_connection(("127.0.0.1", standalone.port), timeout=10)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, command: api.BaseCommand, payload: bytes = b"") -> None:
        self.sock.sendall(encode(command, payload))

    def receive(self) -> api.BaseCommand | None:
        header = self._exactly(4)
        if header is None:
            return None
        (size,) = struct.unpack(">I", header)
        body = self._exactly(size)
        return None if body is None else parse_frame(body).command

    def _exactly(self, count: int) -> bytes | None:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def connect(self) -> None:
        self.send(commands.command(T.CONNECT, "connect", client_version="raw", protocol_version=21))
        reply = self.receive()
        assert reply is not None
        assert reply.type == T.CONNECTED

    def closed_after(self) -> bool:
        """Read what is left; True if the broker closed the connection."""
        try:
            while self.receive() is not None:
                pass
        except (ConnectionResetError, TimeoutError):
            return False
        return True


def still_works(standalone: Standalone) -> None:
    client = standalone.client()
    producer = client.create_producer("persistent://public/default/after-garbage")
    producer.send(b"ok")
    client.close()


def test_oversized_frame_gets_an_error_and_a_close(standalone: Standalone) -> None:
    raw = RawConnection(standalone)
    raw.send_raw(struct.pack(">I", 512 * 1024 * 1024))
    reply = raw.receive()
    assert reply is not None
    assert reply.type == T.ERROR
    assert "exceeds" in reply.error.message
    assert raw.closed_after()
    still_works(standalone)


def test_invalid_protobuf_gets_an_error_and_a_close(standalone: Standalone) -> None:
    raw = RawConnection(standalone)
    junk = b"\xff\xfe\xfd\xfc" * 4
    raw.send_raw(struct.pack(">II", len(junk) + 4, len(junk)) + junk)
    reply = raw.receive()
    assert reply is not None
    assert reply.type == T.ERROR
    assert raw.closed_after()
    still_works(standalone)


def test_commands_before_connect_are_refused(standalone: Standalone) -> None:
    raw = RawConnection(standalone)
    raw.send(commands.ping())
    reply = raw.receive()
    assert reply is not None
    assert reply.type == T.ERROR
    assert "before CONNECT" in reply.error.message
    assert raw.closed_after()


def test_bad_checksum_gets_send_error_and_the_connection_survives(standalone: Standalone) -> None:
    raw = RawConnection(standalone)
    raw.connect()
    raw.send(commands.command(T.LOOKUP, "lookupTopic", topic="persistent://public/default/crc", request_id=9))
    assert raw.receive().type == T.LOOKUP_RESPONSE  # type: ignore[union-attr]
    raw.send(commands.command(T.PRODUCER, "producer", topic="persistent://public/default/crc",
                              producer_id=1, request_id=1))  # fmt: skip
    assert raw.receive().type == T.PRODUCER_SUCCESS  # type: ignore[union-attr]
    section = bytearray(
        payload_section(api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1), b"data")
    )
    section[-1] ^= 0xFF
    raw.send(commands.command(T.SEND, "send", producer_id=1, sequence_id=0), bytes(section))
    reply = raw.receive()
    assert reply is not None
    assert reply.type == T.SEND_ERROR
    assert reply.send_error.error == api.ChecksumError
    raw.send(commands.ping())
    assert raw.receive().type == T.PONG  # type: ignore[union-attr]


def test_unsupported_commands_get_a_clear_error(standalone: Standalone) -> None:
    raw = RawConnection(standalone)
    raw.connect()
    raw.send(api.BaseCommand(type=T.NEW_TXN))
    reply = raw.receive()
    assert reply is not None
    assert reply.type == T.ERROR
    assert "NEW_TXN is not supported" in reply.error.message
    raw.send(commands.ping())
    assert raw.receive().type == T.PONG  # type: ignore[union-attr]
    client = standalone.client()
    assert isinstance(client, pulsar.Client)
    client.close()


def test_every_command_type_out_of_place_leaves_the_broker_serving(standalone: Standalone) -> None:
    """Each command the protocol knows, with its fields left empty and out of any sensible order
    (producers, consumers and requests that were never set up): the broker answers or closes
    the connection, never crashes, and keeps serving everyone else."""
    raw = RawConnection(standalone)
    raw.connect()
    closed = 0
    for kind in T.values():
        if kind in (T.CONNECT, T.PING, T.PONG):
            continue
        # Commands are handled in order: the PONG comes after whatever answers the command.
        raw.send_raw(_partial_frame(api.BaseCommand(type=kind)) + encode(commands.ping()))
        try:
            while (reply := raw.receive()) is not None and reply.type != T.PONG:
                pass
        except (ConnectionResetError, BrokenPipeError):
            reply = None
        if reply is None:  # the broker closed that connection: carry on with a new one
            closed += 1
            raw = RawConnection(standalone)
            raw.connect()
    assert closed < 10, "most commands get an answer, not a closed connection"
    still_works(standalone)
    assert "Traceback" not in standalone.log_path.read_text()


def _partial_frame(command: api.BaseCommand) -> bytes:
    """A frame whose command may lack required fields (what a buggy client might send)."""
    data = command.SerializePartialToString()
    return struct.pack(">II", len(data) + 4, len(data)) + data
