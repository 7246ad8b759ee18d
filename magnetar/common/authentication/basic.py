"""Pulsar's AuthenticationProviderBasic: a user and password (the client sends ``user:password``,
or HTTP ``Basic``) checked against ``basic_auth_conf``, an htpasswd-style file of ``user:hash``
lines (``htpasswd -B`` writes them). Hashes are bcrypt (``$2a$``, ``$2b$``, ``$2y$``); another
kind is refused when the file is read, naming its line, rather than never matching.

A bcrypt check costs tens of milliseconds on purpose, so callers run it off the event loop.
"""

from __future__ import annotations

import hashlib

import bcrypt

from magnetar.common.authentication.errors import AuthenticationFailed
from magnetar.common.authentication.keys import KeyMaterialError, read_key_bytes

BCRYPT_PREFIXES = (b"$2a$", b"$2b$", b"$2y$")


def hash_password(password: str, rounds: int = 10) -> str:
    """A bcrypt hash of ``password`` for a ``user:hash`` line."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds)).decode()


def parse_users(text: str, source: str = "basic_auth_conf") -> dict[str, bytes]:
    """``user:hash`` lines (blank lines and ``#`` comments skipped); ValueError naming a bad line."""
    users: dict[str, bytes] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, hashed = line.partition(":")
        if not sep or not user or not hashed:
            raise ValueError(f"{source} line {number}: not user:hash")
        digest = hashed.encode()
        if not digest.startswith(BCRYPT_PREFIXES):
            raise ValueError(
                f"{source} line {number}: user {user!r} has a hash that is not bcrypt "
                "(make it with htpasswd -B or magnetar tokens hash-password)"
            )
        users[user] = digest
    return users


class BasicProvider:
    method = "basic"

    def __init__(self, users: dict[str, bytes]) -> None:
        self._users = users
        # A client reconnecting sends the same password each time: one bcrypt check per
        # password proven while the process lives, not one per connection (kept as a digest,
        # never the password).
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
        digest = self._users.get(user)
        if digest is None or not self._matches(user, password.encode(), digest):
            raise AuthenticationFailed(f"wrong user or password for {user!r}")
        return user

    def expires_at(self, data: bytes) -> float | None:
        return None  # a password does not expire mid-connection

    def _matches(self, user: str, password: bytes, digest: bytes) -> bool:
        key = hashlib.sha256(b"\0".join((user.encode(), digest, password))).digest()
        if key in self._proven:
            return True
        if bcrypt.checkpw(password, digest):
            self._proven.add(key)
            return True
        return False
