"""The client's side of authentication, as Pulsar's ``--auth-plugin`` / ``--auth-params`` (and
the broker's ``broker_client_authentication_plugin`` / ``…_parameters``) say it.

Token plugin (``token`` or ``org.apache.pulsar.client.impl.auth.AuthenticationToken``) with params
``token:<jwt>``, ``file:///path/to/token`` or the bare token.
"""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.common.authentication.keys import read_key_bytes

TOKEN_PLUGINS = ("token", "org.apache.pulsar.client.impl.auth.AuthenticationToken")


@dataclass(frozen=True)
class ClientCredentials:
    method: str = ""
    data: bytes = b""

    @classmethod
    def from_plugin(cls, plugin: str, params: str) -> ClientCredentials:
        """ValueError for a plugin not known or params it cannot use."""
        if not plugin:
            return cls()
        if plugin not in TOKEN_PLUGINS:
            raise ValueError(f"unsupported authentication plugin {plugin!r}: known are {list(TOKEN_PLUGINS)}")
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

    def http_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.data.decode()}"} if self.method == "token" else {}
