"""TLS contexts and certificate reloading (magnetar/common/tls.py), on real sockets."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from magnetar.common.certificates import CertificateAuthority
from magnetar.common.tls import (
    CertificateReloader,
    TlsFiles,
    TlsSettingsError,
    client_context,
    server_context,
)


def test_unusable_files_are_named(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    issued = ca.issue("server", "server", hosts=("127.0.0.1",))
    other = ca.issue("other", "other")
    with pytest.raises(TlsSettingsError, match="needs tls_certificate_file_path"):
        server_context(TlsFiles())
    with pytest.raises(TlsSettingsError, match=r"not found: /nowhere/cert\.pem"):
        server_context(TlsFiles("/nowhere/cert.pem", str(issued.key)))
    with pytest.raises(TlsSettingsError, match="cannot use certificate"):
        server_context(TlsFiles(str(issued.certificate), str(other.key)))
    with pytest.raises(TlsSettingsError, match="needs tls_trust_certs_file_path"):
        server_context(TlsFiles(str(issued.certificate), str(issued.key)), require_client_cert=True)


async def _served_cn(port: int, trust: str) -> str:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(trust))
    ssl_object = writer.get_extra_info("ssl_object")
    subject = dict(rdn[0] for rdn in ssl_object.getpeercert()["subject"])
    writer.close()
    return str(subject["commonName"])


async def test_a_renewed_certificate_reaches_new_connections_and_a_broken_one_is_skipped(
    tmp_path: Path,
) -> None:
    ca = CertificateAuthority(tmp_path)
    issued = ca.issue("server", "first", hosts=("127.0.0.1",))
    files = TlsFiles(str(issued.certificate), str(issued.key))
    context = server_context(files)
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    reloader = CertificateReloader(context, files, interval_s=60)
    trust = str(ca.certificate_path)
    try:
        assert await _served_cn(port, trust) == "first"
        assert not reloader.check(), "nothing changed"
        issued.certificate.write_text("half-written")  # a renewal caught mid-way
        assert not reloader.check()
        assert await _served_cn(port, trust) == "first", "the previous pair kept serving"
        ca.issue("server", "second", hosts=("127.0.0.1",))
        assert reloader.check()
        assert await _served_cn(port, trust) == "second"
    finally:
        server.close()
        await server.wait_closed()


def test_a_client_context_checks_the_server_unless_told_not_to(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    assert client_context(str(ca.certificate_path)).verify_mode == ssl.CERT_REQUIRED
    assert client_context(allow_insecure=True).verify_mode == ssl.CERT_NONE
