"""The writable side of the cursor RPCs (``proto/broker.proto``): read-only owners forward
subscribe, ack, unsubscribe and seek here, and they act on the topic's one durable cursor exactly
as a consumer connected to this broker would (its own consumers see the same acknowledgements)."""

from __future__ import annotations

import logging
from typing import Protocol

import grpc

from magnetar.broker.managed_ledger import InitialPosition, ManagedCursor, ManagedLedgerError, Position
from magnetar.broker.namespace import NamespaceError
from magnetar.broker.ownership import LookupUrls, NotServedError
from magnetar.broker.subscription import Subscription
from magnetar.broker.topic import InvalidTopicNameError, Topic
from magnetar.proto import PulsarApi_pb2 as api
from magnetar.proto import broker_pb2 as pb
from magnetar.proto import broker_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[object, object]


def cursor_state(cursor: ManagedCursor) -> pb.CursorState:
    mark = cursor.mark_delete_position
    return pb.CursorState(
        mark_delete=pb.Position(ledger_id=mark.ledger_id, entry_id=mark.entry_id),
        acked=[
            pb.AckedRange(
                first=pb.Position(ledger_id=first.ledger_id, entry_id=first.entry_id),
                last=pb.Position(ledger_id=last.ledger_id, entry_id=last.entry_id),
            )
            for first, last in cursor.individually_deleted_ranges
        ],
    )


def _position(message: pb.Position) -> Position:
    return Position(message.ledger_id, message.entry_id)


class TopicSource(Protocol):
    async def get_or_load(self, name: str) -> Topic: ...


class BundleLookup(Protocol):
    """Taking a bundle nobody owns yet, as a lookup would."""

    async def lookup(
        self, topic: str, *, authoritative: bool = False, listener: str | None = None
    ) -> tuple[LookupUrls, bool]: ...


class CursorService(pb_grpc.CursorsServicer):
    def __init__(self, topics: TopicSource, lookups: BundleLookup) -> None:
        self._topics = topics
        self._lookups = lookups

    async def _topic(self, name: str, context: Context) -> Topic:
        """The topic, loaded here; a topic whose bundle nobody owns is taken (as a lookup would)."""
        try:
            try:
                return await self._topics.get_or_load(name)
            except NotServedError:
                urls, redirect = await self._lookups.lookup(name, authoritative=True)
                if redirect:
                    raise NotServedError(f"{name} is owned by {urls.url}") from None
                return await self._topics.get_or_load(name)
        except NotServedError as exc:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except (InvalidTopicNameError, NamespaceError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except ManagedLedgerError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        raise AssertionError("unreachable")  # abort raises

    async def _subscription(
        self, request: pb.CursorRequest | pb.AcknowledgeRequest | pb.SeekRequest, context: Context
    ) -> Subscription:
        topic = await self._topic(request.topic, context)
        subscription = topic.subscriptions.get(request.subscription)
        if subscription is None or not subscription.durable:
            await context.abort(
                grpc.StatusCode.NOT_FOUND, f"no subscription {request.subscription} on {request.topic}"
            )
        assert subscription is not None
        return subscription

    async def Subscribe(self, request: pb.SubscribeRequest, context: Context) -> pb.CursorState:
        topic = await self._topic(request.topic, context)
        initial = InitialPosition.EARLIEST if request.earliest else InitialPosition.LATEST
        try:
            # Shared until a consumer connects here: an idle subscription takes the next one's type.
            subscription = await topic.subscription(
                request.subscription, api.CommandSubscribe.Shared, initial
            )
        except ManagedLedgerError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return cursor_state(subscription.cursor)

    async def GetCursor(self, request: pb.CursorRequest, context: Context) -> pb.CursorState:
        return cursor_state((await self._subscription(request, context)).cursor)

    async def Acknowledge(self, request: pb.AcknowledgeRequest, context: Context) -> pb.CursorState:
        subscription = await self._subscription(request, context)
        positions = [_position(p) for p in request.positions]
        try:
            if request.cumulative:
                if positions:
                    await subscription.acknowledge_cumulative(positions[0])
            elif positions:
                await subscription.acknowledge(positions)
        except ManagedLedgerError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return cursor_state(subscription.cursor)

    async def Unsubscribe(self, request: pb.UnsubscribeRequest, context: Context) -> pb.UnsubscribeResponse:
        topic = await self._topic(request.topic, context)
        subscription = topic.subscriptions.get(request.subscription)
        if subscription is None:
            return pb.UnsubscribeResponse()  # already gone: the read-only owner's wish is met
        if subscription.consumers and not request.force:
            await context.abort(
                grpc.StatusCode.ABORTED,
                f"consumers of {request.subscription} are connected to the writable owner",
            )
        for consumer in list(subscription.consumers):
            consumer.close_by_broker()
            subscription.remove_consumer(consumer)
        try:
            await topic.unsubscribe(request.subscription)
        except ManagedLedgerError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return pb.UnsubscribeResponse()

    async def Seek(self, request: pb.SeekRequest, context: Context) -> pb.CursorState:
        subscription = await self._subscription(request, context)
        try:
            await subscription.seek(_position(request.position))
        except ManagedLedgerError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return cursor_state(subscription.cursor)
