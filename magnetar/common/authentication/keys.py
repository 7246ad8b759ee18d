"""Token signing keys, in the forms Pulsar's settings take them.

``token_secret_key`` / ``token_public_key`` and the ``tokens`` commands accept ``data:;base64,…``
(the key inline), ``file:///path`` or a plain path. A secret key file holds the raw bytes (or,
made with ``--base64``, their base64 text); key pairs are written as Pulsar writes them (DER:
PKCS#8 private, X.509 public) and read in DER or PEM.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from pathlib import Path
from urllib.parse import unquote, urlparse

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes


class KeyMaterialError(ValueError):
    """A key that cannot be read: missing file, bad encoding, not a key."""


def read_key_bytes(source: str) -> bytes:
    """The bytes of ``data:;base64,…``, ``file:///path`` or a plain path."""
    source = source.strip()
    if source.startswith("data:"):
        try:
            return base64.b64decode(source.split(",", 1)[1], validate=True)
        except (IndexError, binascii.Error) as exc:
            raise KeyMaterialError(f"key {source[:24]}…: not data:;base64,<base64>: {exc}") from None
    path = Path(unquote(urlparse(source).path)) if source.startswith("file:") else Path(source)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyMaterialError(f"cannot read key {path}: {exc.strerror}") from None


def secret_key(source: str) -> bytes:
    """An HMAC secret: the raw bytes, or base64 text of them (``create-secret-key --base64``)."""
    raw = read_key_bytes(source)
    try:
        text = raw.decode("ascii").strip()
        decoded = base64.b64decode(text, validate=True)
        if len(decoded) >= 16 and len(text) % 4 == 0:
            return decoded
    except (UnicodeDecodeError, binascii.Error):
        pass
    return raw


def private_key(source: str) -> PrivateKeyTypes:
    raw = read_key_bytes(source)
    try:
        if raw.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_private_key(raw, password=None)
        return serialization.load_der_private_key(raw, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyMaterialError(f"{source}: not a private key in DER or PEM: {exc}") from None


def public_key(source: str) -> PublicKeyTypes:
    raw = read_key_bytes(source)
    try:
        if raw.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_public_key(raw)
        return serialization.load_der_public_key(raw)
    except (ValueError, TypeError) as exc:
        raise KeyMaterialError(f"{source}: not a public key in DER or PEM: {exc}") from None


def new_secret_key() -> bytes:
    """32 random bytes: an HS256 key (Pulsar's create-secret-key)."""
    return secrets.token_bytes(32)


def new_key_pair(algorithm: str = "RS256") -> tuple[bytes, bytes]:
    """(private, public) in DER for RS256 (2048-bit RSA) or ES256 (P-256)."""
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if algorithm == "RS256":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif algorithm == "ES256":
        key = ec.generate_private_key(ec.SECP256R1())
    else:
        raise KeyMaterialError(f"unsupported key-pair algorithm {algorithm!r}: RS256 or ES256")
    private = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public
