"""A broker that stores nothing: the floor of a load generator (what it does with nothing behind).

    .venv/bin/python bench/noop_broker.py                       # plain port only
    .venv/bin/python bench/noop_broker.py --cert broker.cert.pem --key broker.key.pem   # and TLS

It speaks just enough of Pulsar's binary protocol for a producer of the official client: CONNECT
(any authentication taken), PARTITIONED_METADATA (0 partitions), LOOKUP (Connect, here),
PRODUCER, SEND (a receipt at once, nothing kept), CLOSE_PRODUCER, PING. It prints
``noop ready service_url=pulsar://… [service_url_tls=pulsar+ssl://…]`` and runs until SIGTERM.
Run it as a process of its own, so it does not share an interpreter with the generator.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import ssl
import struct
import sys
from pathlib import Path
from typing import cast

from magnetar.broker.protocol.commands import T, command, message_id, pong, success
from magnetar.broker.protocol.frames import encode, parse_frame
from magnetar.proto import PulsarApi_pb2 as api

_U32 = struct.Struct(">I")
PROTOCOL_VERSION = 21


class NoopConnection(asyncio.Protocol):
    def __init__(self, urls: tuple[str, str]) -> None:
        self.urls = urls
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.entry = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass of it

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        out: list[bytes] = []
        while len(self.buffer) >= 4:
            (size,) = _U32.unpack_from(self.buffer, 0)
            if len(self.buffer) < 4 + size:
                break
            body = bytes(self.buffer[4 : 4 + size])
            del self.buffer[: 4 + size]
            reply = self.answer(parse_frame(body).command)
            if reply is not None:
                out.append(encode(reply))
        if out and self.transport is not None:
            self.transport.write(b"".join(out))

    def answer(self, cmd: api.BaseCommand) -> api.BaseCommand | None:
        kind = cmd.type
        if kind == T.SEND:
            self.entry += 1
            send = cmd.send
            return command(
                T.SEND_RECEIPT, "send_receipt", producer_id=send.producer_id, sequence_id=send.sequence_id,
                message_id=message_id(1, self.entry), highest_sequence_id=send.highest_sequence_id,
            )  # fmt: skip
        if kind == T.CONNECT:
            version = min(cmd.connect.protocol_version, PROTOCOL_VERSION)
            return command(
                T.CONNECTED, "connected", server_version="noop", protocol_version=version,
                max_message_size=5 * 1024 * 1024,
            )  # fmt: skip
        if kind == T.PARTITIONED_METADATA:
            return command(
                T.PARTITIONED_METADATA_RESPONSE, "partitionMetadataResponse",
                request_id=cmd.partitionMetadata.request_id, partitions=0,
                response=api.CommandPartitionedTopicMetadataResponse.Success,
            )  # fmt: skip
        if kind == T.LOOKUP:
            return command(
                T.LOOKUP_RESPONSE, "lookupTopicResponse", request_id=cmd.lookupTopic.request_id,
                brokerServiceUrl=self.urls[0], brokerServiceUrlTls=self.urls[1] or None,
                response=api.CommandLookupTopicResponse.Connect, authoritative=True,
            )  # fmt: skip
        if kind == T.PRODUCER:
            request = cmd.producer
            return command(
                T.PRODUCER_SUCCESS, "producer_success", request_id=request.request_id,
                producer_name=request.producer_name or f"noop-{request.producer_id}",
                last_sequence_id=-1, producer_ready=True,
            )  # fmt: skip
        if kind == T.CLOSE_PRODUCER:
            return success(cmd.close_producer.request_id)
        if kind == T.PING:
            return pong()
        return None


async def serve(cert: Path | None, key: Path | None) -> None:
    loop = asyncio.get_running_loop()
    urls = ["", ""]

    def connection() -> NoopConnection:
        return NoopConnection((urls[0], urls[1]))

    plain = await loop.create_server(connection, "127.0.0.1", 0)
    urls[0] = f"pulsar://127.0.0.1:{plain.sockets[0].getsockname()[1]}"
    servers = [plain]
    if cert is not None and key is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        tls = await loop.create_server(connection, "127.0.0.1", 0, ssl=context)
        urls[1] = f"pulsar+ssl://127.0.0.1:{tls.sockets[0].getsockname()[1]}"
        servers.append(tls)
    tls_url = f" service_url_tls={urls[1]}" if urls[1] else ""
    print(f"noop ready service_url={urls[0]}{tls_url}", flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cert", type=Path, help="server certificate (PEM): also listen with TLS")
    parser.add_argument("--key", type=Path, help="its key (PEM)")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args.cert, args.key))
    else:
        uvloop.run(serve(args.cert, args.key))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
    sys.exit(0)
