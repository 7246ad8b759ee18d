"""A small certificate authority: a CA and the certificates it signs, as PEM (the shape
``tls_*_file_path``, the clients' ``tls_trust_certs_file_path`` and cert-manager's Secrets take).
Keys are ECDSA P-256: fast to make, taken by every client.

``new_ca`` / ``issue`` work in memory (the operator puts the PEM in Secrets, never on its disk);
``CertificateAuthority`` keeps a CA and what it issues as files in a directory (``magnetar
standalone --secure``, local clusters, tests).

What is read back from a certificate (its expiry, serial, names, issuer) is asked of a
:class:`Certificate`, the PEM parsed once: the operator asks several questions of every
certificate in a cluster's Secrets at each renewal check, and a CA signs several certificates in
a row. ``Certificate.load`` also keeps the certificates it parsed lately, since the same Secrets
are read again at every check.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
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
    ca: KeyPair | LoadedPair,
    common_name: str,
    hosts: list[str] | tuple[str, ...] = (),
    *,
    validity: datetime.timedelta = VALIDITY,
) -> KeyPair:
    """A certificate for ``common_name`` (a client's role, or a server's name) signed by ``ca``,
    valid for ``hosts`` (DNS names, wildcards or IP addresses) as a server and usable as a client
    certificate (mutual TLS). A CA that signs several is best loaded once (``load_pair``)."""
    loaded = ca if isinstance(ca, LoadedPair) else load_pair(ca)
    ca_cert, ca_key = loaded.certificate.parsed, loaded.key
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


@dataclass(frozen=True)
class Certificate:
    """A PEM certificate, parsed once; what is read from it comes from that one parse."""

    pem: bytes = field(repr=False)
    parsed: x509.Certificate = field(repr=False, compare=False)

    @classmethod
    def load(cls, pem: bytes) -> Certificate:
        """CertificateError unless ``pem`` is a PEM certificate."""
        return _parsed(bytes(pem))

    @property
    def not_after(self) -> datetime.datetime:
        return self.parsed.not_valid_after_utc

    @property
    def serial(self) -> str:
        """The serial number in hex: public, and new with every certificate issued."""
        return f"{self.parsed.serial_number:x}"

    @property
    def dns_names(self) -> list[str]:
        try:
            sans = self.parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        except x509.ExtensionNotFound:
            return []
        return [str(n) for n in sans.value.get_values_for_type(x509.DNSName)]

    def renewal_due(self, renew_before: datetime.timedelta, *, now: datetime.datetime | None = None) -> bool:
        """True when it expires within ``renew_before`` (or has)."""
        return self.not_after - renew_before <= (now or _now())

    def signed_by(self, ca: Certificate) -> bool:
        """Whether ``ca`` issued (signed) this certificate."""
        try:
            self.parsed.verify_directly_issued_by(ca.parsed)
        except (InvalidSignature, ValueError, TypeError):
            return False
        return True


# Renewal checks read the same few Secrets over and over: a PEM seen lately is not parsed again.
# Only certificates are kept (public), never keys.
@functools.lru_cache(maxsize=64)
def _parsed(pem: bytes) -> Certificate:
    try:
        return Certificate(pem, x509.load_pem_x509_certificate(pem))
    except ValueError:
        raise CertificateError("not a PEM certificate") from None


@dataclass(frozen=True)
class LoadedPair:
    """A :class:`KeyPair` parsed once, its key checked to belong to its certificate."""

    pair: KeyPair = field(repr=False)
    certificate: Certificate
    key: PrivateKeyTypes = field(repr=False)


def load_pair(pair: KeyPair) -> LoadedPair:
    """CertificateError unless ``pair.key`` is a PEM key that belongs to ``pair.certificate``."""
    certificate = Certificate.load(pair.certificate)
    try:
        key = serialization.load_pem_private_key(pair.key, password=None)
    except (ValueError, TypeError):
        raise CertificateError("not a PEM private key (unencrypted PKCS#1, PKCS#8 or SEC1)") from None
    mine = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    theirs = certificate.parsed.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if mine != theirs:
        raise CertificateError("the key does not belong to the certificate")
    return LoadedPair(pair, certificate, key)


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

    @functools.cached_property
    def _loaded(self) -> LoadedPair:
        # at the first issue, not at construction (an authority made only to have its files
        # written never reads them back), and then not again for each certificate issued
        return load_pair(self._ca)

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        hosts: tuple[str, ...] = (),
        validity: datetime.timedelta = VALIDITY,
    ) -> Issued:
        """``<name>.cert.pem`` / ``<name>.key.pem`` for ``common_name``, valid for ``hosts``."""
        pair = issue(self._loaded, common_name, hosts, validity=validity)
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
