"""Certificates the operator issues, in memory: a cluster's CA and the brokers' and bookies'
certificates as PEM bytes (magnetar.common.certificates), ready for a Secret in cert-manager's
shape (``tls.crt``, ``tls.key``, ``ca.crt``), never written to the operator's disk; and what the
operator reads back from such Secrets to decide whether to re-issue.

The renewal decision is :func:`renewal_due`: a certificate is re-issued once it is within
``renew_before`` of its expiry (or already expired, or unreadable).
"""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from magnetar.common.certificates import (
    CA_VALIDITY,
    VALIDITY,
    CertificateError,
    KeyPair,
    issue,
    load_certificate,
    new_ca,
)

__all__ = [
    "CA_VALIDITY",
    "VALIDITY",
    "CertificateError",
    "KeyPair",
    "check_pair",
    "dns_names",
    "issue",
    "load_certificate",
    "new_ca",
    "not_after",
    "renewal_due",
    "serial",
    "signed_by",
]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def not_after(pem: bytes) -> datetime.datetime:
    return load_certificate(pem).not_valid_after_utc


def serial(pem: bytes) -> str:
    """The certificate's serial number in hex: public, and new with every certificate issued."""
    return f"{load_certificate(pem).serial_number:x}"


def dns_names(pem: bytes) -> list[str]:
    try:
        sans = load_certificate(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return [str(n) for n in sans.value.get_values_for_type(x509.DNSName)]


def renewal_due(
    pem: bytes, renew_before: datetime.timedelta, *, now: datetime.datetime | None = None
) -> bool:
    """True when the certificate expires within ``renew_before`` (or has, or cannot be read)."""
    try:
        expires = not_after(pem)
    except CertificateError:
        return True
    return expires - renew_before <= (now or _now())


def check_pair(pair: KeyPair) -> None:
    """CertificateError unless ``pair.key`` is a PEM key that belongs to ``pair.certificate``."""
    certificate = load_certificate(pair.certificate)
    try:
        key = serialization.load_pem_private_key(pair.key, password=None)
    except (ValueError, TypeError):
        raise CertificateError("not a PEM private key (unencrypted PKCS#1, PKCS#8 or SEC1)") from None
    mine = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    theirs = certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if mine != theirs:
        raise CertificateError("the key does not belong to the certificate")


def signed_by(pem: bytes, ca_pem: bytes) -> bool:
    """Whether ``ca_pem``'s certificate issued (signed) ``pem``'s."""
    try:
        load_certificate(pem).verify_directly_issued_by(load_certificate(ca_pem))
    except (CertificateError, InvalidSignature, ValueError, TypeError):
        return False
    return True
