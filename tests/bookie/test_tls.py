"""Mutual TLS between the ledger client and bookies, against real gRPC servers:
a bookie with ``tls_client_authentication`` takes adds and reads from a client whose certificate
its CA signed, and refuses, with nothing written, a client without a certificate, one with a
certificate another CA signed, and a plain-text one; a certificate renewed in place is served
from the next handshake on. Auto-recovery re-replicates between such bookies with the bookies'
own certificates.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from pydantic import ValidationError

from magnetar.bookie.client import BKError, LedgerClient, LedgerClientConfig, NoSuchLedgerError
from magnetar.bookie.client.bookie_connection import BookieConnection
from magnetar.bookie.client.errors import BookieUnavailableError
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.server import BookieServer, start_bookie
from magnetar.common.certificates import CertificateAuthority
from magnetar.common.grpc_tls import grpc_channel_credentials
from magnetar.common.metadata import open_store
from magnetar.common.tls import TlsFiles, client_context
from tests.bookie.conftest import BookieFactory
from tests.bookie.helpers import Client, Pki, config, entry, make_pki
from tests.bookie.test_autorecovery import RECOVERY_SETTINGS, Cluster, eventually, nobody_uses
from tests.bookie.test_shell import shell

LEDGER = 7


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
async def bookie(tmp_path: Path, memory_url: str, pki: Pki) -> AsyncIterator[BookieServer]:
    """An in-process bookie, registered in a memory store, serving TLS and requiring client certs."""
    settings = {"metadata_service_uri": memory_url, **pki.bookie_settings()}
    server = await start_bookie(config(tmp_path / "bookie", **settings))
    yield server
    await server.stop()


async def ledger_client(memory_url: str, tls: TlsFiles | None) -> LedgerClient:
    store = await open_store(memory_url)
    settings = LedgerClientConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, rpc_timeout_s=5, tls=tls)
    return LedgerClient(store, settings)


async def assert_nothing_written(server: BookieServer, pki: Pki, ledger_id: int) -> None:
    """Asked by a client the bookie accepts, the bookie holds no entry of the ledger."""
    trusted = BookieConnection(
        server.bookie_id, server.address, credentials=grpc_channel_credentials(pki.client(pki.broker))
    )
    try:
        with pytest.raises(NoSuchLedgerError):
            await trusted.read_entry(ledger_id, 0)
    finally:
        await trusted.close()


async def test_client_with_a_certificate_the_ca_signed_writes_and_reads(
    bookie: BookieServer, memory_url: str, pki: Pki
) -> None:
    client = await ledger_client(memory_url, pki.client(pki.broker))
    try:
        writer = await client.create_ledger()
        for i in range(20):
            assert await writer.add_entry(f"entry {i}".encode()) == i
        await writer.close()
        reader = await client.open_ledger(writer.ledger_id)
        entries = await reader.read(0, reader.last_add_confirmed)
        assert [e.payload for e in entries] == [f"entry {i}".encode() for i in range(20)]
    finally:
        await client.close()


@pytest.mark.parametrize("who", ["no certificate", "another CA's certificate"])
async def test_client_without_a_trusted_certificate_is_refused_and_nothing_is_written(
    bookie: BookieServer, memory_url: str, pki: Pki, who: str
) -> None:
    issued = None if who == "no certificate" else pki.intruder
    credentials = grpc_channel_credentials(pki.client(issued))
    connection = BookieConnection(bookie.bookie_id, bookie.address, credentials=credentials)
    try:
        with pytest.raises(BookieUnavailableError) as refused:
            await asyncio.wait_for(connection.add(entry(LEDGER, 0), b"key"), 10)
        # The handshake is what failed, and the error says so.
        assert "TLS handshake refused" in str(refused.value), refused.value
    finally:
        await connection.close()
    await assert_nothing_written(bookie, pki, LEDGER)

    # Through the ledger client: the add fails; the ledger has no entry anywhere.
    client = await ledger_client(memory_url, pki.client(issued))
    try:
        writer = await client.create_ledger()
        with pytest.raises(BKError):
            await asyncio.wait_for(writer.add_entry(b"refused"), 15)
        await assert_nothing_written(bookie, pki, writer.ledger_id)
    finally:
        await client.close()


async def test_plain_text_client_cannot_talk_to_the_tls_port(bookie: BookieServer, pki: Pki) -> None:
    plain = Client(bookie.address)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await asyncio.wait_for(plain.add(entry(LEDGER, 0)), 10)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await plain.close()
    await assert_nothing_written(bookie, pki, LEDGER)


def _served_certificate(address: str, pki: Pki) -> bytes:
    """The certificate a TLS handshake with ``address`` gets, proving the broker's certificate."""
    host, port = address.rsplit(":", 1)
    context = client_context(str(pki.ca), certificate=str(pki.broker.certificate), key=str(pki.broker.key))
    context.set_alpn_protocols(["h2"])  # as gRPC clients do
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as wrapped,
    ):
        served = wrapped.getpeercert(binary_form=True)
    assert served is not None
    return served


async def test_a_renewed_certificate_is_served_without_a_restart(
    bookie: BookieServer, memory_url: str, pki: Pki, tmp_path: Path
) -> None:
    """The operator and cert-manager renew in place: the next connection gets the new certificate,
    a half-written renewal is skipped, and clients keep writing throughout."""
    ports = (bookie.address, bookie.add_address)  # gRPC's, and the framed adds'
    first = await asyncio.to_thread(_served_certificate, bookie.address, pki)
    assert first == ssl.PEM_cert_to_DER_cert(pki.bookie.certificate.read_text())
    assert await asyncio.to_thread(_served_certificate, bookie.add_address, pki) == first
    client = await ledger_client(memory_url, pki.client(pki.broker))
    try:
        writer = await client.create_ledger()
        await writer.add_entry(b"before")
        pki.bookie.certificate.write_text("half-written")
        for port in ports:
            assert await asyncio.to_thread(_served_certificate, port, pki) == first, port
        CertificateAuthority(pki.ca.parent).issue("bookie", "bookie", hosts=("127.0.0.1", "localhost"))
        for port in ports:
            renewed = await asyncio.to_thread(_served_certificate, port, pki)
            assert renewed != first, port
            assert renewed == ssl.PEM_cert_to_DER_cert(pki.bookie.certificate.read_text()), port
        await writer.add_entry(b"after")
        await writer.close()
        reader = await client.open_ledger(writer.ledger_id)
        assert [e.payload for e in await reader.read(0, 1)] == [b"before", b"after"]
    finally:
        await client.close()


async def test_unusable_tls_files_stop_the_bookie_naming_the_setting(tmp_path: Path, pki: Pki) -> None:
    missing = tmp_path / "nowhere.pem"
    with pytest.raises(ValidationError, match=re.escape(f"tls_certificate_path: file not found: {missing}")):
        config(tmp_path, **{**pki.bookie_settings(), "tls_certificate_path": str(missing)})
    (tmp_path / "key.txt").write_text("not a key")
    with pytest.raises(ValidationError, match=r"tls_key_path: .* is not a PEM file"):
        config(tmp_path, **{**pki.bookie_settings(), "tls_key_path": str(tmp_path / "key.txt")})
    with pytest.raises(ValidationError, match="tls_client_authentication needs"):
        config(tmp_path, **{**pki.bookie_settings(), "tls_trust_store_path": ""})
    with pytest.raises(ValidationError, match="tls_certificate_path/tls_key_path"):
        # a key that is not the certificate's
        config(tmp_path, **{**pki.bookie_settings(), "tls_key_path": str(pki.broker.key)})
    assert BookieConfig(**{**pki.bookie_settings()}).server_tls() is not None


async def test_ledger_client_names_an_unusable_trust_file(tmp_path: Path, memory_url: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"trust certs: file not found: {tmp_path / 'ca.pem'}")):
        await ledger_client(memory_url, TlsFiles(trust_certs=str(tmp_path / "ca.pem")))


@pytest.mark.zookeeper
@pytest.mark.slow
async def test_auto_recovery_re_replicates_between_bookies_that_require_certificates(
    zk_url: str, bookie_factory: BookieFactory, pki: Pki
) -> None:
    """Bookie processes (the CLI's ``--set`` path) with client authentication: a killed bookie's
    entries are copied by the survivors' replication workers, which prove the bookies' own
    certificates to each other."""
    settings = {**RECOVERY_SETTINGS, **pki.bookie_settings()}
    bookies = [await bookie_factory.start_async(zk_url, **settings) for _ in range(3)]
    store = await open_store(zk_url)
    client = LedgerClient(
        store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2, tls=pki.client(pki.broker))
    )
    try:
        writer = await client.create_ledger()
        for i in range(100):
            await writer.add_entry(b"%d" % i)
        await writer.close()
        victim = sorted((await client.ledger_metadata(writer.ledger_id)).bookies())[0]
        cluster = Cluster(zk_url, store, client, bookies, bookie_factory)
        await cluster.by_id(victim).kill_async()

        async def replaced() -> bool:
            return await nobody_uses(cluster, victim, [writer.ledger_id])

        await eventually(replaced, 60, f"ledger {writer.ledger_id} re-replicated off {victim}")
        # The copies are readable from the bookies now in the ensemble.
        reader = await client.open_ledger_no_recovery(writer.ledger_id)
        assert [e.payload for e in await reader.read(0, 99)] == [b"%d" % i for i in range(100)]
    finally:
        await client.close()
        await store.close()


@pytest.mark.zookeeper
async def test_shell_reads_from_bookies_that_require_certificates(
    zk_url: str, bookie_factory: BookieFactory, pki: Pki
) -> None:
    await bookie_factory.start_async(zk_url, auto_recovery_daemon_enabled=False, **pki.bookie_settings())
    client = await ledger_client(zk_url, pki.client(pki.broker))
    try:
        writer = await client.create_ledger()
        await writer.add_entry(b"over mutual TLS")
        await writer.close()
    finally:
        await client.close()
        await client.store.close()
    tls = ["--tls-trust-store-path", str(pki.ca)]
    tls += ["--tls-certificate-path", str(pki.broker.certificate), "--tls-key-path", str(pki.broker.key)]
    read = await asyncio.to_thread(shell, zk_url, *tls, "readledger", str(writer.ledger_id))
    assert read.returncode == 0, read.stderr
    assert "over mutual TLS" in read.stdout
    refused = await asyncio.to_thread(shell, zk_url, "readledger", str(writer.ledger_id))
    assert refused.returncode != 0
