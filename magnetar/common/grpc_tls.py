"""Mutual TLS on the gRPC channels (broker↔bookie, broker↔broker): gRPC credentials from the same
PEM files as the asyncio TLS ports (``tls.py``), and a start-up check of those files that names
the setting a bad path came from.

gRPC reads the PEM bytes when credentials are made, so they are made once when a server starts
or a client is built: a missing file then stops the process with the setting's name, instead of
every handshake failing later with a gRPC status. gRPC always checks the server's certificate
against the host the client dials (a bookie's advertised address, a broker's RPC address): its
subject alternative names must name that host or IP address.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from magnetar.common.tls import TlsFiles, TlsSettingsError, client_context

log = logging.getLogger(__name__)
ChannelOptions = Sequence[tuple[str, int | str]]


def check_tls_files(files: TlsFiles, *, certificate: str, key: str, trust_certs: str) -> None:
    """TlsSettingsError naming the setting (``certificate``, ``key``, ``trust_certs`` are the
    settings' names) whose file is missing, unreadable, not PEM, or not the key of the certificate."""
    named = ((certificate, files.certificate), (key, files.key), (trust_certs, files.trust_certs))
    for setting, path in named:
        if path:
            _read_pem(setting, path)
    if bool(files.certificate) != bool(files.key):
        raise TlsSettingsError(f"{certificate} and {key} go together: set both or neither")
    try:
        # The ssl module parses what gRPC would only reject at the first handshake.
        client_context(files.trust_certs, certificate=files.certificate, key=files.key)
    except TlsSettingsError as exc:
        raise TlsSettingsError(f"{certificate}/{key}/{trust_certs}: {exc}") from None


def grpc_server_credentials(files: TlsFiles, *, require_client_auth: bool = True) -> grpc.ServerCredentials:
    """A TLS port serving ``files``' certificate; with ``require_client_auth`` a client must prove
    a certificate that ``files.trust_certs`` signed, else its handshake fails. Renewed files are
    served from the next handshake on, without a restart (see ``RenewedCertificates``)."""
    if not (files.certificate and files.key):
        raise TlsSettingsError("a gRPC TLS port needs a certificate and its key")
    if require_client_auth and not files.trust_certs:
        raise TlsSettingsError("requiring client certificates needs the CAs to trust (a trust store)")
    # grpc's stubs leave out the None (no change) its documentation allows the fetcher to return
    fetcher: Any = RenewedCertificates(files)
    return grpc.dynamic_ssl_server_credentials(
        _configuration(files), fetcher, require_client_authentication=require_client_auth
    )


class RenewedCertificates:
    """What gRPC asks before each handshake on a TLS port: the files again once they changed (a
    certificate renewed in place, as cert-manager or the operator do), else None (keep serving
    what it has). A renewal caught half-written — not PEM yet, or a key not matching its
    certificate — is skipped until it is whole, the previous pair serving meanwhile."""

    def __init__(self, files: TlsFiles) -> None:
        self._files = files
        self._seen = files.stamps()

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        stamps = self._files.stamps()
        if stamps == self._seen:
            return None
        try:
            # the ssl module tells a key that does not match its certificate; gRPC would only
            # fail every handshake
            client_context(certificate=self._files.certificate, key=self._files.key)
            configuration = _configuration(self._files)
        except TlsSettingsError as exc:
            log.warning("gRPC TLS certificate changed but cannot be loaded yet (kept the previous): %s", exc)
            return None
        self._seen = stamps
        log.info("gRPC TLS certificate reloaded from %s", self._files.certificate)
        return configuration


def _configuration(files: TlsFiles) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration(
        [(_read_pem("key", files.key), _read_pem("certificate", files.certificate))],
        root_certificates=_read_pem("trust certs", files.trust_certs) if files.trust_certs else None,
    )


def grpc_channel_credentials(files: TlsFiles) -> grpc.ChannelCredentials:
    """A client's TLS: the server checked against ``files.trust_certs`` (the system's CAs when
    empty); ``files``' certificate proved to the server when there is one."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read_pem("trust certs", files.trust_certs) if files.trust_certs else None,
        private_key=_read_pem("key", files.key) if files.key else None,
        certificate_chain=_read_pem("certificate", files.certificate) if files.certificate else None,
    )


def open_channel(
    address: str, credentials: grpc.ChannelCredentials | None, options: ChannelOptions = ()
) -> grpc.aio.Channel:
    """A TLS channel with ``credentials``, a plain-text one without."""
    if credentials is None:
        return grpc.aio.insecure_channel(address, options=options)
    return grpc.aio.secure_channel(address, credentials, options=options)


def add_port(server: grpc.aio.Server, bind: str, credentials: grpc.ServerCredentials | None) -> int:
    """Bind ``bind`` with TLS when there are ``credentials`` (then TLS only); the bound port, 0 if none."""
    if credentials is None:
        return server.add_insecure_port(bind)
    return server.add_secure_port(bind, credentials)


def _read_pem(setting: str, path: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise TlsSettingsError(f"{setting}: file not found: {path}") from None
    except OSError as exc:
        raise TlsSettingsError(f"{setting}: cannot read {path}: {exc.strerror}") from None
    if b"-----BEGIN " not in data:
        raise TlsSettingsError(f"{setting}: {path} is not a PEM file")
    return data


def explain_refusal(details: str) -> str:
    """``details`` of a failed call on a TLS channel, with what a closed connection most likely
    means there: gRPC only says "Socket closed" when the server dropped the handshake (with TLS
    1.3 a client learns that its certificate was refused only by the server closing)."""
    if "handshake" in details.lower() or "socket closed" in details.lower():
        return (
            f"{details} (TLS handshake refused: the server requires a client certificate its CAs "
            "signed, or this client does not trust the server's certificate)"
        )
    return details
