"""Pulsar's authentication refresh: a connection whose credentials expire (a token's ``exp``) is
challenged with AUTH_CHALLENGE every ``authentication_refresh_check_seconds``; the client answers
AUTH_RESPONSE with fresh credentials for the same role, or the connection is closed.

A client that has not answered by the next check, answers with credentials that fail, or with
another role's, is disconnected with a log line saying which (the official clients reconnect with
their current credentials).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from magnetar.broker.protocol import commands
from magnetar.common.authentication.providers import Authentication, AuthenticationFailed
from magnetar.proto import PulsarApi_pb2 as api

log = logging.getLogger(__name__)
T = api.BaseCommand.Type
#: what the challenge carries: Pulsar's brokers ask for a refresh with these bytes
REFRESH = b"refresh"


class RefreshChannel(Protocol):
    """The connection, as the refresh sees it."""

    @property
    def remote(self) -> str: ...

    def send(self, command: api.BaseCommand) -> None: ...

    def close_for(self, reason: str) -> None: ...


class AuthenticationRefresh:
    def __init__(
        self,
        authentication: Authentication,
        channel: RefreshChannel,
        *,
        interval_s: float,
        server_version: str,
        protocol_version: int,
    ) -> None:
        self._authentication = authentication
        self._channel = channel
        self._interval_s = interval_s
        self._server_version = server_version
        self._protocol_version = protocol_version
        self._method = ""
        self._role: str | None = None
        self._expires_at: float | None = None
        self._challenged = False

    def connected(self, method: str, data: bytes, role: str | None) -> None:
        """CONNECT authenticated ``role`` with these credentials."""
        self._method, self._role = method, role
        self._expires_at = self._authentication.expires_at(method, data)

    async def run(self) -> None:
        """The periodic check, for as long as the connection lives."""
        while True:
            await asyncio.sleep(self._interval_s)
            if not self.check():
                return

    def check(self) -> bool:
        """Challenge expired credentials; close a connection that left the last challenge
        unanswered. False once the connection is being closed."""
        if self._expires_at is None or time.time() < self._expires_at:
            return True
        if self._challenged:
            self._channel.close_for(
                f"the {self._method} credentials of role {self._role!r} expired and no fresh ones "
                f"came within {self._interval_s:g}s of the AUTH_CHALLENGE"
            )
            return False
        self._challenged = True
        challenge = api.AuthData(auth_method_name=self._method, auth_data=REFRESH)
        self._channel.send(
            commands.command(
                T.AUTH_CHALLENGE,
                "authChallenge",
                server_version=self._server_version,
                protocol_version=self._protocol_version,
                challenge=challenge,
            )
        )
        return True

    async def answered(self, response: api.CommandAuthResponse) -> None:
        """AUTH_RESPONSE: fresh credentials of the same method and role renew the connection."""
        method, data = response.response.auth_method_name, response.response.auth_data
        try:
            role = await asyncio.to_thread(self._authentication.authenticate, method, data)
        except AuthenticationFailed as exc:
            self._channel.close_for(f"refreshed credentials refused: {exc}")
            return
        if role != self._role or method != self._method:
            self._channel.close_for(
                f"refreshed credentials are {method} for role {role!r}, not {self._method} for {self._role!r}"
            )
            return
        self._expires_at = self._authentication.expires_at(method, data)
        self._challenged = False
        log.info("connection %s: %s credentials of role %r refreshed", self._channel.remote, method, role)
