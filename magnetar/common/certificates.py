"""A small certificate authority: a CA and the certificates it signs, as PEM (the shape
``tls_*_file_path``, the clients' ``tls_trust_certs_file_path`` and cert-manager's Secrets take).
Keys are ECDSA P-256: fast to make, taken by every client.

``new_ca`` / ``issue`` work in memory (the operator puts the PEM in Secrets, never on its disk);
``CertificateAuthority`` keeps a CA and what it issues as files in a directory (``magnetar
standalone --secure``, local clusters, tests).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: how long an issued certificate is valid
VALIDITY = datetime.timedelta(days=365)
#: how long a CA is valid (what it signs is renewed, not the CA)
CA_VALIDITY = datetime.timedelta(days=3650)


class CertificateError(ValueError):
    """PEM that is no certificate or key, or a key that does not belong to the certificate."""


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM (PKCS#8) key; the key never shows in a repr."""

    certificate: bytes
    key: bytes = field(repr=False)


def new_ca(common_name: str, *, validity: datetime.timedelta = CA_VALIDITY) -> KeyPair:
    """A self-signed CA that may sign certificates (not other CAs)."""
    key = ec.generate_private_key(ec.SECP256R1())
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
    hosts: list[str] | tuple[str, ...] = (),
    *,
    validity: datetime.timedelta = VALIDITY,
) -> KeyPair:
    """A certificate for ``common_name`` (a client's role, or a server's name) signed by ``ca``,
    valid for ``hosts`` (DNS names, wildcards or IP addresses) as a server and usable as a client
    certificate (mutual TLS)."""
    ca_cert = load_certificate(ca.certificate)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise CertificateError("the CA key is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
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


def load_certificate(pem: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        raise CertificateError("not a PEM certificate") from None


@dataclass(frozen=True)
class Issued:
    certificate: Path
    key: Path


class CertificateAuthority:
    """A CA kept as ``ca.cert.pem`` / ``ca.key.pem`` in ``directory`` (reused when there), writing
    what it issues beside them."""

    def __init__(self, directory: Path, name: str = "magnetar-ca") -> None:
        self.directory = directory
        self.certificate_path = directory / "ca.cert.pem"
        key_path = directory / "ca.key.pem"
        if self.certificate_path.exists() and key_path.exists():
            self._ca = KeyPair(self.certificate_path.read_bytes(), key_path.read_bytes())
            return
        directory.mkdir(parents=True, exist_ok=True)
        self._ca = new_ca(name)
        _write_key(key_path, self._ca.key)
        self.certificate_path.write_bytes(self._ca.certificate)

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        hosts: tuple[str, ...] = (),
        validity: datetime.timedelta = VALIDITY,
    ) -> Issued:
        """``<name>.cert.pem`` / ``<name>.key.pem`` for ``common_name``, valid for ``hosts``."""
        pair = issue(self._ca, common_name, hosts, validity=validity)
        issued = Issued(self.directory / f"{name}.cert.pem", self.directory / f"{name}.key.pem")
        _write_key(issued.key, pair.key)
        issued.certificate.write_bytes(pair.certificate)
        return issued


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write_key(path: Path, pem: bytes) -> None:
    path.touch(mode=0o600, exist_ok=True)
    path.write_bytes(pem)
