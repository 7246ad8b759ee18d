"""TLS for every port (Pulsar's ``tls_*`` settings): the server and client SSL contexts, the
certificate a peer proved, and reloading a renewed certificate without a restart.

A server context is made once and kept: ``CertificateReloader`` loads renewed files into that
same context, so connections accepted after the renewal get the new certificate and open ones
keep theirs (as Pulsar's ``tlsCertRefreshCheckDurationSec`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class TlsSettingsError(ValueError):
    """A TLS setting that cannot be used: a file missing or not a certificate or key."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: this side's certificate chain and key, and the CAs it trusts for the peer."""

    certificate: str = ""
    key: str = ""
    trust_certs: str = ""

    def paths(self) -> list[Path]:
        return [Path(p) for p in (self.certificate, self.key, self.trust_certs) if p]

    def stamps(self) -> tuple[tuple[str, int], ...]:
        """The files' modification times: a renewal in place changes them."""
        stamps = []
        for path in self.paths():
            with contextlib.suppress(OSError):
                stamps.append((str(path), path.stat().st_mtime_ns))
        return tuple(stamps)


def server_context(files: TlsFiles, *, require_client_cert: bool = False) -> ssl.SSLContext:
    """The context a TLS port serves with; a client certificate is asked for whenever there is a
    trust store (so the TLS provider can read its role) and required if ``require_client_cert``."""
    if not (files.certificate and files.key):
        raise TlsSettingsError("a TLS port needs tls_certificate_file_path and tls_key_file_path")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, files)
    if files.trust_certs:
        _load_trust(context, files.trust_certs)
        context.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    elif require_client_cert:
        raise TlsSettingsError(
            "tls_require_trusted_client_cert_on_connect needs tls_trust_certs_file_path (the CAs to trust)"
        )
    return context


def client_context(
    trust_certs: str = "",
    *,
    certificate: str = "",
    key: str = "",
    allow_insecure: bool = False,
    verify_hostname: bool = False,
) -> ssl.SSLContext:
    """A client's context: the server's certificate checked against ``trust_certs`` (the system's
    CAs when empty) unless ``allow_insecure``; a client certificate sent when one is given.
    Hostnames are not checked by default, as Pulsar's clients (``tlsHostnameVerificationEnable``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = verify_hostname and not allow_insecure
    if allow_insecure:
        context.verify_mode = ssl.CERT_NONE
    elif trust_certs:
        _load_trust(context, trust_certs)
    else:
        context.load_default_certs()
    if certificate or key:
        _load_chain(context, TlsFiles(certificate, key))
    return context


def peer_common_name(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """The CN of the certificate the peer proved (None: no TLS, or no verified certificate)."""
    if ssl_object is None:
        return None
    certificate: Any = ssl_object.getpeercert()
    for rdn in (certificate or {}).get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return str(value)
    return None


class CertificateReloader:
    """Loads a renewed certificate, key or trust store into a live server context; a renewal
    half-written (a key not matching its certificate) is retried at the next check, and the
    context keeps serving the previous pair meanwhile."""

    def __init__(self, context: ssl.SSLContext, files: TlsFiles, interval_s: float) -> None:
        self._context = context
        self._files = files
        self._interval_s = interval_s
        self._seen = files.stamps()

    def check(self) -> bool:
        """Reload if a file changed since the last load; True if it did."""
        stamps = self._files.stamps()
        if stamps == self._seen:
            return False
        try:
            _load_chain(self._context, self._files)
            if self._files.trust_certs:
                _load_trust(self._context, self._files.trust_certs)
        except TlsSettingsError as exc:
            log.warning("TLS certificate changed but cannot be loaded yet (kept the previous): %s", exc)
            return False
        self._seen = stamps
        log.info("TLS certificate reloaded from %s", self._files.certificate)
        return True

    async def run(self) -> None:
        if self._interval_s <= 0:
            return
        while True:
            await asyncio.sleep(self._interval_s)
            # On the loop, not a thread: a context must not change while a handshake reads it
            # (the files are a few kilobytes, read once per interval).
            self.check()


def _load_chain(context: ssl.SSLContext, files: TlsFiles) -> None:
    for path in (files.certificate, files.key):
        if not Path(path).is_file():
            raise TlsSettingsError(f"TLS file not found: {path}")
    try:
        context.load_cert_chain(files.certificate, files.key)
    except (ssl.SSLError, OSError) as exc:
        raise TlsSettingsError(
            f"cannot use certificate {files.certificate} with key {files.key}: {exc}"
        ) from None


def _load_trust(context: ssl.SSLContext, trust_certs: str) -> None:
    try:
        context.load_verify_locations(cafile=trust_certs)
    except FileNotFoundError:
        raise TlsSettingsError(f"TLS trust certificates not found: {trust_certs}") from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsSettingsError(f"cannot read trust certificates {trust_certs}: {exc}") from None
