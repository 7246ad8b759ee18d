"""The read-only side of the cursor RPCs: find the topic's writable owner, call it, follow it.

The writable owner is found as a lookup would: the ownership node of the topic's bundle names the
broker, whose registry record advertises its cursor RPC address. With no owner (nobody produced
or consumed there yet) the least-loaded writable broker is asked and takes the bundle. A call that
fails because the owner moved (unload, transfer, crash) is retried against the new owner, so a
writable-owner move is transparent to the read-only owner's consumers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from magnetar.broker.managed_ledger import ManagedLedgerError, Position
from magnetar.broker.namespace import Bundle
from magnetar.broker.ownership import BrokerInfo, Ownership
from magnetar.common.grpc_tls import explain_refusal, grpc_channel_credentials, open_channel
from magnetar.common.tls import TlsFiles
from magnetar.proto import broker_pb2 as pb
from magnetar.proto import broker_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

R = TypeVar("R")

#: statuses after which the owner is looked up again and the call retried
_RETRY = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.DEADLINE_EXCEEDED}


class CursorRpcError(ManagedLedgerError):
    """The writable owner refused a cursor change or could not be reached in time."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


def _pb_position(position: Position) -> pb.Position:
    return pb.Position(ledger_id=position.ledger_id, entry_id=position.entry_id)


class CursorClient:
    def __init__(
        self,
        writable: Ownership,
        bundle_of: Callable[[str], Awaitable[tuple[str, Bundle]]],
        *,
        rpc_timeout_s: float = 10.0,
        retry_for_s: float = 30.0,
        tls: TlsFiles | None = None,
    ) -> None:
        """``tls``: mutual TLS to the writable brokers' RPC ports (None: plain text)."""
        #: a read-only view of the writable pool's registry and ownership (never registers)
        self._writable = writable
        self._bundle_of = bundle_of
        self._timeout = rpc_timeout_s
        self._retry_for = retry_for_s
        self._channels: dict[str, tuple[grpc.aio.Channel, pb_grpc.CursorsStub]] = {}
        self._credentials = grpc_channel_credentials(tls) if tls else None

    async def writable_owner(self, topic: str) -> BrokerInfo | None:
        """The registry record of the topic's writable owner (None: no writable owner now)."""
        namespace, bundle = await self._bundle_of(topic)
        owner = await self._writable.owner(namespace, bundle)
        if owner is None:
            return None
        return next((b for b in await self._writable.brokers() if b.broker_id == owner.broker_id), None)

    async def _target(self, topic: str) -> BrokerInfo:
        info = await self.writable_owner(topic)
        if info is not None and info.cursor_rpc_address:
            return info
        # No owner yet: the least-loaded writable broker takes the bundle when called.
        brokers = [b for b in await self._writable.brokers() if b.cursor_rpc_address]
        if not brokers:
            raise CursorRpcError(
                f"no writable broker is serving cursor RPCs for {topic}", grpc.StatusCode.UNAVAILABLE
            )
        return min(brokers, key=lambda b: (b.bundles, b.topics, b.broker_id))

    def _stub(self, address: str) -> pb_grpc.CursorsStub:
        found = self._channels.get(address)
        if found is None:
            channel = open_channel(
                address,
                self._credentials,
                options=[("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000)],
            )
            found = (channel, pb_grpc.CursorsStub(channel))  # type: ignore[no-untyped-call]
            self._channels[address] = found
        return found[1]

    async def _call(self, topic: str, what: str, call: Callable[[pb_grpc.CursorsStub], Awaitable[R]]) -> R:
        deadline = time.monotonic() + self._retry_for
        delay = 0.1
        while True:
            try:
                target = await self._target(topic)
                return await call(self._stub(target.cursor_rpc_address))
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                detail = exc.details() or str(code)
                if self._credentials is not None and code == grpc.StatusCode.UNAVAILABLE:
                    detail = explain_refusal(detail)
            except CursorRpcError as exc:
                code, detail = exc.code or grpc.StatusCode.UNKNOWN, str(exc)
            if code not in _RETRY or time.monotonic() + delay > deadline:
                raise CursorRpcError(f"{what} of {topic} at the writable owner failed: {detail}", code)
            log.info("%s of %s: %s; looking the writable owner up again", what, topic, detail)
            await asyncio.sleep(delay)
            delay = min(1.0, delay * 2)

    async def subscribe(self, topic: str, subscription: str, *, earliest: bool) -> pb.CursorState:
        request = pb.SubscribeRequest(topic=topic, subscription=subscription, earliest=earliest)
        return await self._call(topic, "subscribe", lambda s: s.Subscribe(request, timeout=self._timeout))

    async def get(self, topic: str, subscription: str) -> pb.CursorState:
        request = pb.CursorRequest(topic=topic, subscription=subscription)
        return await self._call(
            topic, "reading the cursor", lambda s: s.GetCursor(request, timeout=self._timeout)
        )

    async def acknowledge(
        self, topic: str, subscription: str, positions: list[Position], *, cumulative: bool
    ) -> pb.CursorState:
        request = pb.AcknowledgeRequest(
            topic=topic,
            subscription=subscription,
            positions=[_pb_position(p) for p in positions],
            cumulative=cumulative,
        )
        return await self._call(topic, "ack", lambda s: s.Acknowledge(request, timeout=self._timeout))

    async def unsubscribe(self, topic: str, subscription: str, *, force: bool = False) -> None:
        request = pb.UnsubscribeRequest(topic=topic, subscription=subscription, force=force)
        await self._call(topic, "unsubscribe", lambda s: s.Unsubscribe(request, timeout=self._timeout))

    async def seek(self, topic: str, subscription: str, position: Position) -> pb.CursorState:
        request = pb.SeekRequest(topic=topic, subscription=subscription, position=_pb_position(position))
        return await self._call(topic, "seek", lambda s: s.Seek(request, timeout=self._timeout))

    async def close(self) -> None:
        for channel, _ in self._channels.values():
            with contextlib.suppress(Exception):
                await channel.close(grace=None)
        self._channels.clear()
