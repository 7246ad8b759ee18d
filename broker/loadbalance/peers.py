"""Broker-to-broker calls of a transfer over gRPC (``proto/peer.proto``): both sides.

``PeerClient`` is the source's side: it asks a destination to prepare a bundle's topics and then
to acquire the bundle. ``PeerService`` is the destination's side, served on the same gRPC server
as the PIP-63 cursor RPCs (``rpc_server.py``), and hands each call to the broker's bundles.
"""

from __future__ import annotations

import logging
from typing import Protocol

import grpc

from magnetar.broker.namespace import Bundle, NamespaceError
from magnetar.broker.ownership import BrokerInfo, NotServedError
from magnetar.broker.topic import InvalidTopicNameError, TopicName
from magnetar.common.grpc_tls import explain_refusal, grpc_channel_credentials, open_channel
from magnetar.common.tls import TlsFiles
from magnetar.proto import peer_pb2 as pb
from magnetar.proto import peer_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[object, object]

#: the source waits this long at most for a prepare: preparing only saves time, and a graceful
#: shutdown transfers its bundles one after the other
PREPARE_TIMEOUT_S = 2.0
ACQUIRE_TIMEOUT_S = 15.0


class HandoverTarget(Protocol):
    """What a transfer's destination does when its source calls."""

    async def prepare(self, topics: list[str]) -> int: ...

    async def acquire_and_load(self, namespace: str, bundle: Bundle, topics: list[str]) -> str: ...


class PeerError(Exception):
    """A peer broker refused a call or could not be reached."""


class PeerClient:
    def __init__(self, tls: TlsFiles | None = None) -> None:
        """``tls``: mutual TLS to the other brokers' RPC ports (None: plain text)."""
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._credentials = grpc_channel_credentials(tls) if tls else None

    def _stub(self, target: BrokerInfo) -> pb_grpc.BrokerPeerStub:
        if not target.cursor_rpc_address:
            raise PeerError(f"{target.broker_id} advertises no broker RPC address")
        channel = self._channels.get(target.cursor_rpc_address)
        if channel is None:
            channel = self._channels[target.cursor_rpc_address] = open_channel(
                target.cursor_rpc_address, self._credentials
            )
        return pb_grpc.BrokerPeerStub(channel)  # type: ignore[no-untyped-call]

    async def prepare(self, target: BrokerInfo, namespace: str, bundle: Bundle, topics: list[str]) -> bool:
        """Have ``target`` prepare ``topics``; never raises (preparing only saves time). True when
        the target prepared them, so it also holds their clients until the handover ends."""
        if not topics:
            return False
        request = pb.BundleTopics(namespace=namespace, bundle=bundle.name, topics=topics)
        try:
            await self._stub(target).PrepareBundle(request, timeout=PREPARE_TIMEOUT_S)
        except (grpc.aio.AioRpcError, PeerError) as exc:
            log.info("prepare on %s failed (%s): the transfer goes on without it", target.broker_id, exc)
            return False
        return True

    async def acquire(self, target: BrokerInfo, namespace: str, bundle: Bundle, topics: list[str]) -> None:
        """Have ``target`` take the bundle and load ``topics``; PeerError when it did not."""
        request = pb.BundleTopics(namespace=namespace, bundle=bundle.name, topics=topics)
        try:
            await self._stub(target).AcquireBundle(request, timeout=ACQUIRE_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise PeerError(f"{target.broker_id}: {exc.code().name} {self._details(exc)}") from None

    def _details(self, exc: grpc.aio.AioRpcError) -> str:
        details = exc.details() or ""
        if self._credentials is not None and exc.code() == grpc.StatusCode.UNAVAILABLE:
            return explain_refusal(details)
        return details

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close(None)
        self._channels.clear()


class PeerService(pb_grpc.BrokerPeerServicer):
    def __init__(self, target: HandoverTarget) -> None:
        self._target = target

    async def PrepareBundle(self, request: pb.BundleTopics, context: Context) -> pb.PrepareResponse:
        try:
            topics = [str(TopicName.parse(t)) for t in request.topics]
        except InvalidTopicNameError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return pb.PrepareResponse(prepared=await self._target.prepare(topics))

    async def AcquireBundle(self, request: pb.BundleTopics, context: Context) -> pb.AcquireResponse:
        try:
            bundle = Bundle.parse(request.bundle)
            owner = await self._target.acquire_and_load(request.namespace, bundle, list(request.topics))
        except NotServedError as exc:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except (InvalidTopicNameError, NamespaceError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return pb.AcquireResponse(owner=owner)
