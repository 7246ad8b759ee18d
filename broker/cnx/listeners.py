"""The broker's binary-protocol ports (architecture §3), as Pulsar's BrokerService opens its
listen channels: pulsar:// and, when the broker has a TLS context, pulsar+ssl://.

Both are bound before the broker's parts are built, since the broker id is its address and plain
port, and serve only once the parts are wired. Each accepted socket is admitted against the
connection limits (``Connections``) before it is served.
"""

from __future__ import annotations

import asyncio
import ssl

from magnetar.broker.cnx.connection import ConnectionDeps, Connections, ServerConnection

#: a client's frames are read up to this many bytes at a time
_READ_LIMIT = 1 << 20


class ProtocolListeners:
    def __init__(self, connections: Connections) -> None:
        self._connections = connections
        self._deps: ConnectionDeps | None = None
        self._servers: list[asyncio.Server] = []
        self.port = 0
        #: the pulsar+ssl:// port (broker_service_port_tls), None without one
        self.tls_port: int | None = None

    async def bind(
        self, host: str, port: int, tls_port: int | None = None, context: ssl.SSLContext | None = None
    ) -> None:
        """Bind the ports (0 picks a free one); nothing is accepted before serve()."""
        plain = await asyncio.start_server(self._accept, host, port, limit=_READ_LIMIT, start_serving=False)
        self._servers.append(plain)
        self.port = plain.sockets[0].getsockname()[1]
        if tls_port is None or context is None:
            return
        tls = await asyncio.start_server(
            self._accept,
            host,
            tls_port,
            limit=_READ_LIMIT,
            ssl=context,
            # a plain-text client on this port, or one that never finishes its handshake, is
            # dropped after this long instead of holding a connection slot
            ssl_handshake_timeout=10.0,
            start_serving=False,
        )
        self._servers.append(tls)
        self.tls_port = tls.sockets[0].getsockname()[1]

    async def serve(self, deps: ConnectionDeps) -> None:
        """Accept connections, each served with ``deps``."""
        self._deps = deps
        for server in self._servers:
            await server.start_serving()

    def close(self) -> None:
        """Accept no more connections (the open ones are closed by their owner, ``Connections``)."""
        for server in self._servers:
            server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._deps is not None  # served only once serve() has the broker's parts
        connection = ServerConnection(self._deps, reader, writer, self._connections.discard)
        refusal = self._connections.refusal(connection.ip)
        if refusal is not None:
            await connection.refuse(refusal)
            return
        self._connections.add(connection)
        await connection.serve()
