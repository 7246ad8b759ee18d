"""Shared pieces of the bookie tests: an in-process bookie, entry builders, and certificates for
mutual TLS (also used by the broker tests of the gRPC channels)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from magnetar.bookie.config import BookieConfig
from magnetar.bookie.digest import entry_digest
from magnetar.bookie.errors import REASON_METADATA_KEY
from magnetar.bookie.server import BookieServer, start_bookie
from magnetar.common.certificates import CertificateAuthority, Issued
from magnetar.common.tls import TlsFiles
from magnetar.proto import bookie_pb2 as pb
from magnetar.proto import bookie_pb2_grpc as pb_grpc


def config(root: Path, **settings: Any) -> BookieConfig:
    return BookieConfig(
        bookie_port=settings.pop("bookie_port", 0),
        prometheus_stats_http_port=settings.pop("prometheus_stats_http_port", 0),
        journal_directory=str(root / "journal"),
        ledger_directories=[str(root / "ledgers")],
        **settings,
    )


def payload(ledger_id: int, entry_id: int, size: int = 100) -> bytes:
    seed = f"L{ledger_id}E{entry_id}|".encode()
    return (seed * (size // len(seed) + 1))[:size]


def entry(ledger_id: int, entry_id: int, lac: int | None = None, data: bytes | None = None) -> pb.Entry:
    lac = entry_id - 1 if lac is None else lac
    data = payload(ledger_id, entry_id) if data is None else data
    return pb.Entry(
        ledger_id=ledger_id,
        entry_id=entry_id,
        last_add_confirmed=lac,
        digest=entry_digest(ledger_id, entry_id, lac, data),
        payload=data,
    )


class Client:
    """A bare gRPC client of one bookie."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.aio.insecure_channel(address)
        self.stub = pb_grpc.BookieStub(self.channel)  # type: ignore[no-untyped-call]

    async def add(self, *entries: pb.Entry, recovery: bool = False, key: bytes = b"") -> list[pb.AddResult]:
        """One AddRequest on a fresh stream, every ledger's entries under ``key``; every result."""
        keys = {e.ledger_id: key for e in entries}
        request = pb.AddRequest(entries=list(entries), recovery=recovery, master_keys=keys)
        call = self.stub.AddEntries(iter([request]))
        return [result async for response in call for result in response.results]

    async def read(
        self, ledger_id: int, entry_id: int, long_poll_ms: int = 0, key: bytes = b""
    ) -> pb.ReadResponse:
        request = pb.ReadRequest(
            ledger_id=ledger_id, entry_id=entry_id, long_poll_timeout_ms=long_poll_ms, master_key=key
        )
        response: pb.ReadResponse = await self.stub.ReadEntry(request, timeout=30)
        return response

    async def close(self) -> None:
        await self.channel.close(grace=None)


def reason_of(error: grpc.aio.AioRpcError) -> str:
    trailers: Any = error.trailing_metadata() or ()
    return next((str(value) for key, value in trailers if key == REASON_METADATA_KEY), "")


@asynccontextmanager
async def running(root: Path, **settings: Any) -> AsyncIterator[tuple[BookieServer, Client]]:
    """An in-process bookie on 127.0.0.1 and a client of it; both stopped on exit."""
    server = await start_bookie(config(root, **settings))
    client = Client(server.address)
    try:
        yield server, client
    finally:
        await client.close()
        await server.stop()


@dataclass(frozen=True)
class Pki:
    """One CA that signs the cluster's certificates, and an intruder signed by another CA."""

    ca: Path
    bookie: Issued
    broker: Issued
    intruder: Issued

    def bookie_settings(self) -> dict[str, Any]:
        return {
            "tls_certificate_path": str(self.bookie.certificate),
            "tls_key_path": str(self.bookie.key),
            "tls_trust_store_path": str(self.ca),
            "tls_client_authentication": True,
        }

    def client(self, issued: Issued | None) -> TlsFiles:
        """A client trusting the cluster's CA, proving ``issued`` (None: no certificate)."""
        if issued is None:
            return TlsFiles(trust_certs=str(self.ca))
        return TlsFiles(str(issued.certificate), str(issued.key), str(self.ca))


def make_pki(directory: Path) -> Pki:
    """Certificates for 127.0.0.1 (gRPC checks the host a client dials against them)."""
    ca = CertificateAuthority(directory / "ca")
    other = CertificateAuthority(directory / "other-ca", name="other-ca")
    return Pki(
        ca=ca.certificate_path,
        bookie=ca.issue("bookie", "bookie", hosts=("127.0.0.1", "localhost")),
        broker=ca.issue("broker", "broker", hosts=("127.0.0.1", "localhost")),
        intruder=other.issue("intruder", "broker", hosts=("127.0.0.1",)),
    )
