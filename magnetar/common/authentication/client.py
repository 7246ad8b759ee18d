"""The client's side of authentication, as Pulsar's ``--auth-plugin`` / ``--auth-params`` (and
the broker's ``broker_client_authentication_plugin`` / ``…_parameters``) say it.

Plugins and their params, as Pulsar's:

- ``token`` (``org.apache.pulsar.client.impl.auth.AuthenticationToken``): ``token:<jwt>``,
  ``file:///path/to/token`` or the bare token;
- ``basic`` (``…AuthenticationBasic``): ``{"userId": "…", "password": "…"}``;
- ``tls`` (``…AuthenticationTls``): ``tlsCertFile:/path/cert.pem,tlsKeyFile:/path/key.pem`` (the
  certificate goes into the TLS handshake; the broker's role is its CN).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from magnetar.common.authentication.keys import read_key_bytes

_PLUGINS = "org.apache.pulsar.client.impl.auth."
METHODS = {
    "token": "token",
    f"{_PLUGINS}AuthenticationToken": "token",
    "basic": "basic",
    f"{_PLUGINS}AuthenticationBasic": "basic",
    "tls": "tls",
    f"{_PLUGINS}AuthenticationTls": "tls",
}


@dataclass(frozen=True)
class ClientCredentials:
    method: str = ""
    data: bytes = b""
    #: the client certificate and key of the tls method (PEM paths)
    tls_certificate: str = ""
    tls_key: str = ""

    @classmethod
    def from_plugin(cls, plugin: str, params: str) -> ClientCredentials:
        """ValueError for a plugin not known or params it cannot use."""
        if not plugin:
            return cls()
        method = METHODS.get(plugin)
        if method is None:
            raise ValueError(f"unsupported authentication plugin {plugin!r}: known are {sorted(METHODS)}")
        if method == "basic":
            return cls._basic(params)
        if method == "tls":
            return cls._tls(params)
        params = params.strip()
        if params.startswith("token:"):
            token = params.removeprefix("token:").encode()
        elif params.startswith("file:"):
            token = read_key_bytes(params).strip()
        else:
            token = params.encode()
        if not token:
            raise ValueError("the token authentication plugin needs a token (token:<jwt> or file:///path)")
        return cls("token", token)

    @classmethod
    def _basic(cls, params: str) -> ClientCredentials:
        try:
            doc = json.loads(params)
            user, password = str(doc["userId"]), str(doc["password"])
        except (ValueError, KeyError, TypeError):
            raise ValueError(
                'the basic authentication plugin needs {"userId": "...", "password": "..."}'
            ) from None
        if not user or ":" in user:
            raise ValueError("the basic authentication plugin's userId must be non-empty, without ':'")
        return cls("basic", f"{user}:{password}".encode())

    @classmethod
    def _tls(cls, params: str) -> ClientCredentials:
        fields = dict(part.split(":", 1) for part in params.split(",") if ":" in part)
        certificate, key = fields.get("tlsCertFile", "").strip(), fields.get("tlsKeyFile", "").strip()
        if not certificate or not key:
            raise ValueError(
                "the tls authentication plugin needs tlsCertFile:/path/cert.pem,tlsKeyFile:/path/key.pem"
            )
        return cls("tls", b"", certificate, key)

    def http_headers(self) -> dict[str, str]:
        if self.method == "token":
            return {"Authorization": f"Bearer {self.data.decode()}"}
        if self.method == "basic":
            return {"Authorization": f"Basic {base64.b64encode(self.data).decode()}"}
        return {}  # tls: the certificate in the handshake says who the caller is
