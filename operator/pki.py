"""Certificates the operator issues, in memory: a cluster's CA and the brokers' and bookies'
certificates as PEM bytes, ready for a Secret in cert-manager's shape (``tls.crt``, ``tls.key``,
``ca.crt``), never written to the operator's disk. Keys are ECDSA P-256, as
magnetar.common.certificates (which writes files, for ``standalone --secure`` and tests) makes them.

The renewal decision is :func:`renewal_due`: a certificate is re-issued once it is within
``renew_before`` of its expiry (or already expired, or unreadable).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: how long an issued certificate is valid
VALIDITY = datetime.timedelta(days=365)
#: how long the CA is valid (it is not rotated; its certificates are)
CA_VALIDITY = datetime.timedelta(days=3650)


class CertificateError(ValueError):
    """PEM that is no certificate or key, or a key that does not belong to the certificate."""


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM (PKCS#8) key; the key never shows in a repr."""

    certificate: bytes
    key: bytes = field(repr=False)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def new_ca(common_name: str, *, validity: datetime.timedelta = CA_VALIDITY) -> KeyPair:
    key = _new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    return KeyPair(certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue(
    ca: KeyPair,
    common_name: str,
    hosts: list[str] | tuple[str, ...],
    *,
    validity: datetime.timedelta = VALIDITY,
) -> KeyPair:
    """A certificate for ``common_name`` signed by ``ca``, valid for ``hosts`` (DNS names, wildcards
    or IP addresses) as a server and usable as a client certificate (mutual TLS)."""
    ca_cert = load_certificate(ca.certificate)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise CertificateError("the CA key is not an ECDSA key")
    key = _new_key()
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
    )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False
        )
    certificate = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def load_certificate(pem: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        raise CertificateError("not a PEM certificate") from None


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
