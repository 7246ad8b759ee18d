"""A small certificate authority: what ``magnetar standalone --secure`` and the tests issue their
TLS certificates with (PEM files, as ``tls_*_file_path`` and the clients' ``tls_trust_certs_file_path``
take them). Keys are ECDSA P-256: fast to make, taken by every client.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class Issued:
    certificate: Path
    key: Path


class CertificateAuthority:
    """A self-signed CA kept as ``ca.cert.pem`` / ``ca.key.pem`` in ``directory`` (reused when there)."""

    def __init__(self, directory: Path, name: str = "magnetar-ca") -> None:
        self.directory = directory
        self.certificate_path = directory / "ca.cert.pem"
        key_path = directory / "ca.key.pem"
        if self.certificate_path.exists() and key_path.exists():
            self._key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
            self._cert = x509.load_pem_x509_certificate(self.certificate_path.read_bytes())
            return
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + 10 * VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(key, hashes.SHA256())
        )
        self._key = key
        _write_key(key_path, key)
        self.certificate_path.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        hosts: tuple[str, ...] = (),
        validity: datetime.timedelta = VALIDITY,
    ) -> Issued:
        """``<name>.cert.pem`` / ``<name>.key.pem`` for ``common_name`` (a client's role, or a
        server's name), valid for ``hosts`` (DNS names or IP addresses) as a server."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self._cert.subject)
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
        certificate = builder.sign(self._key, hashes.SHA256())  # type: ignore[arg-type]
        issued = Issued(self.directory / f"{name}.cert.pem", self.directory / f"{name}.key.pem")
        _write_key(issued.key, key)
        issued.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return issued


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.touch(mode=0o600, exist_ok=True)
    path.write_bytes(pem)
