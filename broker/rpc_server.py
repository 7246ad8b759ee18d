"""The broker's gRPC server: the transfer calls between brokers and (writable brokers) the PIP-63
cursor RPCs, on one port (``broker_cursor_rpc_port``) each broker advertises in its record.
With ``broker_client_tls_enabled`` the port is TLS only and refuses callers whose certificate the
broker's trust store did not sign: only the cluster's brokers may move bundles and cursors."""

from __future__ import annotations

from typing import Protocol

import grpc

from magnetar.broker.loadbalance.peers import HandoverTarget, PeerService
from magnetar.broker.read_only.cursor_service import BundleLookup, CursorService, TopicSource
from magnetar.common.grpc_tls import add_port, grpc_server_credentials
from magnetar.common.tls import TlsFiles
from magnetar.proto import broker_pb2_grpc, peer_pb2_grpc


class Bundles(BundleLookup, HandoverTarget, Protocol):
    """The bundles' side: lookups for the cursor RPCs, the destination's side of a transfer."""


async def start_rpc_server(
    topics: TopicSource,
    bundles: Bundles,
    host: str,
    port: int,
    *,
    cursors: bool,
    tls: TlsFiles | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Serve on ``host:port`` (0: a free port); returns the server and its port. Every broker takes
    transfers; only writable ones serve the cursor RPCs (``cursors``). ``tls``: mutual TLS, client
    certificates required (None: plain text)."""
    credentials = grpc_server_credentials(tls, require_client_auth=True) if tls else None
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    if cursors:
        broker_pb2_grpc.add_CursorsServicer_to_server(CursorService(topics, bundles), server)  # type: ignore[no-untyped-call]
    peer_pb2_grpc.add_BrokerPeerServicer_to_server(PeerService(bundles), server)  # type: ignore[no-untyped-call]
    bound = add_port(server, f"{host}:{port}", credentials)
    if bound == 0:
        raise OSError(f"cannot bind the broker RPC port {host}:{port}")
    await server.start()
    return server, bound
