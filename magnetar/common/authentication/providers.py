"""The broker's side of authentication (Pulsar's AuthenticationService and its providers): the
method a client names, the data it sends and the certificate it proved become a role, or
AuthenticationFailed with why.

Providers: ``token`` (a JWT), ``basic`` (a user and password checked against an htpasswd-style
file of bcrypt hashes) and ``tls`` (the CN of a client certificate the broker's CAs signed).

``authentication_enabled`` off: nobody is asked (no role). On: a caller without credentials gets
``anonymous_user_role`` when one is set and is refused otherwise; a method not among
``authentication_providers`` is refused naming the ones taken.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes

from magnetar.common.authentication import keys, tokens
from magnetar.common.authentication.basic import BasicProvider
from magnetar.common.authentication.errors import AuthenticationFailed

__all__ = ["Authentication", "AuthenticationFailed", "AuthenticationProvider", "TlsProvider", "TokenProvider"]

#: Pulsar's provider class names, and the method each answers to
PROVIDER_METHODS = {
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken": "token",
    "token": "token",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic": "basic",
    "basic": "basic",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls": "tls",
    "tls": "tls",
}


class AuthenticationProvider(Protocol):
    method: str

    def authenticate(self, data: bytes, tls_common_name: str | None) -> str:
        """The role ``data`` (or the client certificate's CN) proves; AuthenticationFailed otherwise."""
        ...

    def expires_at(self, data: bytes) -> float | None:
        """When credentials already authenticated stop being valid (epoch seconds; None: never)."""
        ...


class TokenProvider:
    """Pulsar's AuthenticationProviderToken: a JWT signed with the secret key (HS256) or the
    private key matching ``token_public_key`` (RS256, ES256); the role is ``token_auth_claim``."""

    method = "token"

    def __init__(self, key: bytes | PublicKeyTypes, claim: str = "sub") -> None:
        self._key = key
        self._claim = claim

    @classmethod
    def from_settings(cls, secret_key: str, public_key: str, claim: str) -> TokenProvider:
        if bool(secret_key) == bool(public_key):
            raise ValueError(
                "token authentication needs exactly one of token_secret_key and token_public_key"
            )
        key = keys.secret_key(secret_key) if secret_key else keys.public_key(public_key)
        return cls(key, claim)

    def authenticate(self, data: bytes, tls_common_name: str | None = None) -> str:
        try:
            token = data.decode("ascii").strip()
        except UnicodeDecodeError:
            raise AuthenticationFailed("the token is not ASCII text") from None
        if not token:
            raise AuthenticationFailed("the token is empty")
        try:
            return tokens.check(token, self._key, claim=self._claim).role
        except tokens.TokenError as exc:
            raise AuthenticationFailed(str(exc)) from None

    def expires_at(self, data: bytes) -> float | None:
        return tokens.expiry(data.decode("ascii", "replace").strip())


class TlsProvider:
    """Pulsar's AuthenticationProviderTls: the role is the CN of the client certificate the TLS
    handshake verified against the broker's trust store (so only on a TLS port)."""

    method = "tls"

    def authenticate(self, data: bytes, tls_common_name: str | None = None) -> str:
        if not tls_common_name:
            raise AuthenticationFailed(
                "tls authentication needs a client certificate signed by a CA the broker trusts, "
                "on a TLS port (none was verified on this connection)"
            )
        return tls_common_name

    def expires_at(self, data: bytes) -> float | None:
        return None  # the certificate was checked in the handshake, for the connection's life


@dataclass
class Authentication:
    enabled: bool = False
    providers: Mapping[str, AuthenticationProvider] = field(default_factory=dict)
    anonymous_role: str | None = None

    @classmethod
    def from_settings(
        cls,
        *,
        enabled: bool,
        providers: Iterable[str],
        token_secret_key: str = "",
        token_public_key: str = "",
        token_auth_claim: str = "sub",
        anonymous_user_role: str | None = None,
        basic_auth_conf: str = "",
    ) -> Authentication:
        """From the broker's settings; ValueError naming what is wrong with them."""
        found: dict[str, AuthenticationProvider] = {}
        for name in providers:
            method = PROVIDER_METHODS.get(name)
            if method == "token":
                found[method] = TokenProvider.from_settings(
                    token_secret_key, token_public_key, token_auth_claim
                )
            elif method == "basic":
                found[method] = BasicProvider.from_settings(basic_auth_conf)
            elif method == "tls":
                found[method] = TlsProvider()
            else:
                raise ValueError(
                    f"unknown authentication provider {name!r}: known are {sorted(PROVIDER_METHODS)}"
                )
        if enabled and not found:
            raise ValueError("authentication_enabled needs authentication_providers (e.g. token)")
        return cls(enabled, found, anonymous_user_role or None)

    def authenticate(self, method: str, data: bytes, tls_common_name: str | None = None) -> str | None:
        """The caller's role (None while authentication is off); AuthenticationFailed."""
        if not self.enabled:
            return None
        if not method and not data:
            if self.anonymous_role is not None:
                return self.anonymous_role
            raise AuthenticationFailed(
                f"authentication is required and none was sent (this broker takes: {self._methods()})"
            )
        provider = self.providers.get(method)
        if provider is None and self.anonymous_role is not None:
            # As Pulsar's brokers: a method no provider answers is served as the anonymous role,
            # which then meets authorization like any caller without credentials.
            return self.anonymous_role
        if provider is None:
            raise AuthenticationFailed(
                f"unknown authentication method {method!r} (this broker takes: {self._methods()})"
            )
        return provider.authenticate(data, tls_common_name)

    def expires_at(self, method: str, data: bytes) -> float | None:
        """When a connection's credentials expire (None: never, or authentication off)."""
        provider = self.providers.get(method) if self.enabled else None
        return provider.expires_at(data) if provider is not None else None

    def authenticate_http(self, authorization: str | None, tls_common_name: str | None = None) -> str | None:
        """The role of an HTTP ``Authorization`` header (``Bearer <token>``, ``Basic <base64>``)
        or, without one, of the client certificate; as ``authenticate``."""
        if not authorization:
            if tls_common_name and "tls" in self.providers:
                return self.authenticate("tls", b"", tls_common_name)
            return self.authenticate("", b"")
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            return self.authenticate("token", credentials.strip().encode())
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(credentials.strip(), validate=True)
            except binascii.Error:
                raise AuthenticationFailed("the Basic credentials are not base64") from None
            return self.authenticate("basic", decoded)
        raise AuthenticationFailed(
            f"unsupported Authorization scheme {scheme!r} (Bearer <token> and Basic <base64> are taken)"
        )

    def _methods(self) -> str:
        return ", ".join(sorted(self.providers)) or "none"
