"""Pulsar's AuthenticationProviderBasic: a user and password (the client sends ``user:password``,
or HTTP ``Basic``) checked against ``basic_auth_conf``, an htpasswd file of ``user:hash`` lines.
The hashes ``htpasswd`` writes are taken: bcrypt (``-B``), Apache MD5 (``$apr1$``, its default,
and what Pulsar's own test files hold), SHA-256/512 and DES crypt; another kind (or a plain-text
password) is refused when the file is read, naming its line, rather than never matching.

Hashes are checked with libpass (the maintained passlib); a check costs up to tens of
milliseconds on purpose, so callers run it off the event loop.
"""

from __future__ import annotations

import hashlib

from passlib.context import CryptContext
from passlib.hash import bcrypt

from magnetar.common.authentication.errors import AuthenticationFailed
from magnetar.common.authentication.keys import KeyMaterialError, read_key_bytes

#: what htpasswd writes, plain text left out on purpose
HASHES = CryptContext(
    schemes=["bcrypt", "apr_md5_crypt", "md5_crypt", "sha512_crypt", "sha256_crypt", "des_crypt"],
    default="bcrypt",
)


def hash_password(password: str, rounds: int = 10) -> str:
    """A bcrypt hash of ``password`` for a ``user:hash`` line."""
    return str(bcrypt.using(rounds=rounds).hash(password))


def parse_users(text: str, source: str = "basic_auth_conf") -> dict[str, str]:
    """``user:hash`` lines (blank lines and ``#`` comments skipped); ValueError naming a bad line."""
    users: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, hashed = line.partition(":")
        if not sep or not user or not hashed:
            raise ValueError(f"{source} line {number}: not user:hash")
        if HASHES.identify(hashed) is None:
            raise ValueError(
                f"{source} line {number}: user {user!r} has a hash htpasswd does not write "
                "(bcrypt, $apr1$ MD5, SHA-256/512 or DES crypt; make one with htpasswd -nB)"
            )
        users[user] = hashed
    return users


class BasicProvider:
    method = "basic"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        # A client reconnecting sends the same password each time: one check per password
        # proven while the process lives, not one per connection (kept as a digest, never the
        # password).
        self._proven: set[bytes] = set()

    @classmethod
    def from_settings(cls, basic_auth_conf: str) -> BasicProvider:
        """``basic_auth_conf``: a path, ``file:///path`` or ``data:;base64,…`` (Pulsar's forms)."""
        if not basic_auth_conf:
            raise ValueError("the basic authentication provider needs basic_auth_conf (an htpasswd file)")
        try:
            text = read_key_bytes(basic_auth_conf).decode()
        except (KeyMaterialError, UnicodeDecodeError) as exc:
            raise ValueError(f"basic_auth_conf: {exc}") from None
        return cls(parse_users(text))

    def authenticate(self, data: bytes, tls_common_name: str | None = None) -> str:
        user, sep, password = data.decode("utf-8", "replace").partition(":")
        if not sep or not user:
            raise AuthenticationFailed("basic authentication data is not user:password")
        hashed = self._users.get(user)
        if hashed is None or not self._matches(user, password, hashed):
            raise AuthenticationFailed(f"wrong user or password for {user!r}")
        return user

    def expires_at(self, data: bytes) -> float | None:
        return None  # a password does not expire mid-connection

    def _matches(self, user: str, password: str, hashed: str) -> bool:
        key = hashlib.sha256("\0".join((user, hashed, password)).encode()).digest()
        if key in self._proven:
            return True
        if HASHES.verify(password, hashed):
            self._proven.add(key)
            return True
        return False
