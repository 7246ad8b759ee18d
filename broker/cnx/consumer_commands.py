"""The consumer side of a connection (Pulsar's ServerCnx): SUBSCRIBE, FLOW, ACK, redelivery,
UNSUBSCRIBE, SEEK, GET_LAST_MESSAGE_ID and CONSUMER_STATS."""

from __future__ import annotations

import contextlib
import logging
from typing import Protocol

from magnetar.broker.cnx.admission import consumer_refusal
from magnetar.broker.cnx.channel import CommandChannel, TopicSource
from magnetar.broker.consumer import Consumer, SubType
from magnetar.broker.managed_ledger import (
    Entry,
    InitialPosition,
    ManagedLedgerError,
    Position,
    TopicLedger,
)
from magnetar.broker.managed_ledger.cursor import CompactedEntries
from magnetar.broker.ownership import LookupUrls, NotServedError
from magnetar.broker.protocol import commands
from magnetar.broker.protocol.commands import T
from magnetar.broker.protocol.frames import Frame, FrameError, read_metadata
from magnetar.broker.read_only.cursor import RemoteCursor
from magnetar.broker.schemas.compatibility import IncompatibleSchemaError
from magnetar.broker.schemas.schema_data import InvalidSchemaError
from magnetar.broker.subscription import ConsumerAssignError, Subscription, SubscriptionBusyError
from magnetar.broker.topic import InvalidTopicNameError, Topic
from magnetar.proto import PulsarApi_pb2 as api

log = logging.getLogger(__name__)

E = api.ServerError


class ReadCompactedError(Exception):
    """read_compacted on a subscription type that cannot have it."""


class ConsumerSchemas(Protocol):
    """The schema registry, as consumers meet it (broker/schemas/admission.py)."""

    async def for_consumer(self, topic: str, schema: api.Schema | None, *, idle: bool) -> None: ...


class CompactedReads(Protocol):
    """Topic compaction, as read_compacted consumers meet it (broker/compaction)."""

    async def holder(self, topic: str, ledger: TopicLedger) -> CompactedEntries: ...


class ConsumerCommands:
    def __init__(
        self,
        channel: CommandChannel,
        topics: TopicSource,
        schemas: ConsumerSchemas,
        compacted: CompactedReads,
    ) -> None:
        self._channel = channel
        self._topics = topics
        self._schemas = schemas
        self._compacted = compacted
        self._consumers: dict[int, tuple[Topic, Subscription, Consumer]] = {}

    async def subscribe(self, frame: Frame) -> None:
        request = frame.command.subscribe
        await self._channel.authorize(request.topic, "consume", subscription=request.subscription)
        existing = self._consumers.get(request.consumer_id)
        if existing is not None:
            if not existing[2].closed:
                self._channel.send(commands.success(request.request_id))  # a retry of a subscribe that worked
                return
            # Closed by the broker (a seek from another connection): this is its reconnection.
            self.drop(request.consumer_id)
        try:
            topic = await self._topics.get_or_load(request.topic)
            refusal = consumer_refusal(topic)
            if refusal is not None:
                raise SubscriptionBusyError(refusal)
            idle = not topic.client_producers() and not topic.consumers() and topic.ledger.total_size == 0
            schema = request.schema if request.HasField("schema") else None
            await self._schemas.for_consumer(str(topic.name), schema, idle=idle)
            if request.read_compacted and not topic.name.is_persistent:
                raise ReadCompactedError("read compacted is only allowed on persistent topics")
            if request.read_compacted and request.subType not in (SubType.Exclusive, SubType.Failover):
                raise ReadCompactedError(
                    "read compacted is only allowed on exclusive and failover subscriptions"
                )
            subscription = await self._subscription(topic, request)
            if request.read_compacted:
                subscription.cursor.read_compacted(
                    await self._compacted.holder(str(topic.name), topic.ledger)
                )
            consumer = Consumer(
                request.consumer_id,
                request.consumer_name or f"consumer-{request.consumer_id}",
                self._channel,
                request.subType,
                request.priority_level,
                sticky_ranges=_sticky_ranges(request),
                partition=topic.name.partition_index,
            )
            subscription.add_consumer(consumer)
        except InvalidTopicNameError as exc:
            self._channel.send(commands.error(request.request_id, E.InvalidTopicName, str(exc)))
            return
        except SubscriptionBusyError as exc:
            self._channel.send(commands.error(request.request_id, E.ConsumerBusy, str(exc)))
            return
        except ConsumerAssignError as exc:
            self._channel.send(commands.error(request.request_id, E.ConsumerAssignError, str(exc)))
            return
        except (IncompatibleSchemaError, InvalidSchemaError) as exc:
            self._channel.send(commands.error(request.request_id, E.IncompatibleSchema, str(exc)))
            return
        except ReadCompactedError as exc:
            self._channel.send(commands.error(request.request_id, E.NotAllowedError, str(exc)))
            return
        except (ManagedLedgerError, NotServedError) as exc:
            self._channel.send(commands.error(request.request_id, E.ServiceNotReady, str(exc)))
            return
        self._consumers[request.consumer_id] = (topic, subscription, consumer)
        self._channel.send(commands.success(request.request_id))

    async def _subscription(self, topic: Topic, request: api.CommandSubscribe) -> Subscription:
        if request.durable:
            initial = (
                InitialPosition.EARLIEST
                if request.initialPosition == api.CommandSubscribe.Earliest
                else InitialPosition.LATEST
            )
            subscription = await topic.subscription(
                request.subscription,
                request.subType,
                initial,
                replicated=request.replicate_subscription_state,
            )
            if isinstance(subscription.cursor, RemoteCursor) and not subscription.consumers:
                # PIP-63: a consumer connecting to a read-only owner reads the cursor from the
                # writable owner, so what was acknowledged elsewhere is not sent again.
                await subscription.cursor.refresh()
            return subscription
        return topic.reader(request.subscription, self._reader_start(topic, request), request.subType)

    def _reader_start(self, topic: Topic, request: api.CommandSubscribe) -> Position:
        """Mark-delete position of a reader's cursor: reading starts after it."""
        ledger = topic.ledger
        if not request.HasField("start_message_id"):
            last = ledger.last_confirmed_entry
            if request.initialPosition == api.CommandSubscribe.Earliest or last is None:
                return ledger.before_first()
            return last
        start = request.start_message_id
        ledger_id, entry_id = commands.signed(start.ledgerId), commands.signed(start.entryId)
        if ledger_id < 0:  # MessageId.earliest
            return ledger.before_first()
        if ledger_id >= 2**63 - 1 or entry_id >= 2**63 - 1:  # MessageId.latest
            return ledger.last_confirmed_entry or ledger.before_first()
        # The client skips what it must not see; start on the entry itself so batches arrive whole.
        return Position(ledger_id, entry_id - 1)

    async def flow(self, frame: Frame) -> None:
        flow = frame.command.flow
        entry = self._consumers.get(flow.consumer_id)
        if entry is not None:
            _, subscription, consumer = entry
            subscription.dispatcher.add_permits(consumer, flow.messagePermits)

    async def ack(self, frame: Frame) -> None:
        ack = frame.command.ack
        entry = self._consumers.get(ack.consumer_id)
        if entry is None:
            self._ack_response(ack, E.ConsumerNotFound, f"no consumer {ack.consumer_id}")
            return
        _, subscription, _ = entry
        try:
            await self._acknowledge(ack, subscription)
        except ManagedLedgerError as exc:
            # A read-only owner could not forward the ack: the entries stay unacknowledged and
            # are delivered again, as after any lost ack.
            log.warning("ack on %s failed: %s", subscription.name, exc)
            self._ack_response(ack, E.UnknownError, str(exc))
            return
        self._ack_response(ack, None, None)

    async def _acknowledge(self, ack: api.CommandAck, subscription: Subscription) -> None:
        # An ack_set with bits still set acknowledges part of a batch (the cleared bits): the
        # entry is done once every bit has been cleared by some ack.
        if ack.ack_type == api.CommandAck.Cumulative and ack.message_id:
            m = ack.message_id[0]
            position = Position(commands.signed(m.ledgerId), commands.signed(m.entryId))
            if any(m.ack_set) and not subscription.acknowledge_batch_indexes(position, list(m.ack_set)):
                position = Position(position.ledger_id, position.entry_id - 1)
            await subscription.acknowledge_cumulative(position)
        else:
            done = []
            for m in ack.message_id:
                position = Position(commands.signed(m.ledgerId), commands.signed(m.entryId))
                if not any(m.ack_set) or subscription.acknowledge_batch_indexes(position, list(m.ack_set)):
                    done.append(position)
            if done:
                await subscription.acknowledge(done)

    def _ack_response(self, ack: api.CommandAck, error: int | None, message: str | None) -> None:
        if ack.HasField("request_id"):
            self._channel.send(
                commands.command(
                    T.ACK_RESPONSE,
                    "ackResponse",
                    consumer_id=ack.consumer_id,
                    request_id=ack.request_id,
                    error=error,
                    message=message,
                )
            )

    async def redeliver(self, frame: Frame) -> None:
        request = frame.command.redeliverUnacknowledgedMessages
        entry = self._consumers.get(request.consumer_id)
        if entry is None:
            return
        _, subscription, consumer = entry
        if request.message_ids and subscription.sub_type in (SubType.Shared, SubType.Key_Shared):
            positions = [
                Position(commands.signed(m.ledgerId), commands.signed(m.entryId)) for m in request.message_ids
            ]
            subscription.dispatcher.redeliver(consumer, positions)
        else:
            subscription.dispatcher.redeliver(consumer, None)

    async def close_consumer(self, frame: Frame) -> None:
        request = frame.command.close_consumer
        self.drop(request.consumer_id)
        self._channel.send(commands.success(request.request_id))

    def drop(self, consumer_id: int) -> None:
        entry = self._consumers.pop(consumer_id, None)
        if entry is None:
            return
        topic, subscription, consumer = entry
        consumer.closed = True
        subscription.remove_consumer(consumer)
        if not subscription.durable and not subscription.consumers:
            if topic.subscriptions.get(subscription.name) is subscription:
                del topic.subscriptions[subscription.name]
            self._channel.spawn(subscription.close())

    async def unsubscribe(self, frame: Frame) -> None:
        request = frame.command.unsubscribe
        entry = self._attached(request.request_id, request.consumer_id)
        if entry is None:
            return
        topic, subscription, consumer = entry
        others = [c for c in subscription.consumers if c is not consumer]
        if others and not request.force:
            self._channel.send(
                commands.error(
                    request.request_id, E.ConsumerBusy, "other consumers are connected to the subscription"
                )
            )
            return
        for other in others:  # forced: the others are told to go (their subscription is gone)
            other.close_by_broker()
            subscription.remove_consumer(other)
        self._consumers.pop(request.consumer_id, None)
        consumer.closed = True
        subscription.remove_consumer(consumer)
        try:
            await topic.unsubscribe(subscription.name)
        except ManagedLedgerError as exc:
            self._channel.send(
                commands.error(request.request_id, E.UnknownError, f"unsubscribe failed: {exc}")
            )
            return
        self._channel.send(commands.success(request.request_id))

    async def seek(self, frame: Frame) -> None:
        request = frame.command.seek
        entry = self._attached(request.request_id, request.consumer_id)
        if entry is None:
            return
        topic, subscription, _ = entry
        if request.HasField("message_publish_time"):
            position = await topic.position_published_since(request.message_publish_time)
        else:
            m = request.message_id
            ledger_id, entry_id = commands.signed(m.ledgerId), commands.signed(m.entryId)
            position = topic.ledger.first_position() if ledger_id < 0 else Position(ledger_id, entry_id)
        for consumer_id in [cid for cid, (_, s, _) in self._consumers.items() if s is subscription]:
            self._consumers.pop(consumer_id, None)
        try:
            await subscription.seek(position)
        except ManagedLedgerError as exc:
            self._channel.send(commands.error(request.request_id, E.UnknownError, f"seek failed: {exc}"))
            return
        # As Pulsar: the consumers were closed first, the answer comes once the cursor is reset.
        self._channel.send(commands.success(request.request_id))

    async def last_message_id(self, frame: Frame) -> None:
        request = frame.command.getLastMessageId
        entry = self._attached(request.request_id, request.consumer_id)
        if entry is None:
            return
        topic, subscription, _ = entry
        last = await topic.last_dispatchable_position()
        stored = await topic.ledger.read_entry(last) if last is not None else None
        compacted = subscription.cursor.compacted
        horizon = compacted.horizon if compacted is not None else None
        if compacted is not None and horizon is not None and (last is None or last <= horizon):
            # a compacted reader's last message is the compacted view's (Pulsar's too): the
            # topic's own may be one compaction left out, which it would wait for in vain
            last = compacted.last_position()
            kept = compacted.entries_at([last]) if last is not None else []
            stored = kept[0] if kept else None
        # With the partition, as in the messages: the client compares the two whole, so a
        # reader of a partition would otherwise wait for a message past its last one.
        partition = topic.name.partition_index
        if last is None:
            message_id = commands.message_id(-1, -1, partition)
        else:
            batch_index = _last_batch_index(stored) if stored is not None else -1
            message_id = commands.message_id(last.ledger_id, last.entry_id, partition, batch_index)
        mark = subscription.cursor.mark_delete_position
        self._channel.send(
            commands.command(
                T.GET_LAST_MESSAGE_ID_RESPONSE,
                "getLastMessageIdResponse",
                request_id=request.request_id,
                last_message_id=message_id,
                consumer_mark_delete_position=commands.message_id(mark.ledger_id, mark.entry_id),
            )
        )

    async def consumer_stats(self, frame: Frame) -> None:
        request = frame.command.consumerStats
        entry = self._consumers.get(request.consumer_id)
        if entry is None:
            self._channel.send(
                commands.command(
                    T.CONSUMER_STATS_RESPONSE,
                    "consumerStatsResponse",
                    request_id=request.request_id,
                    error_code=E.ConsumerNotFound,
                    error_message=f"no consumer {request.consumer_id}",
                )
            )
            return
        _, subscription, consumer = entry
        self._channel.send(
            commands.command(
                T.CONSUMER_STATS_RESPONSE,
                "consumerStatsResponse",
                request_id=request.request_id,
                consumerName=consumer.name,
                availablePermits=max(0, consumer.permits),
                unackedMessages=sum(consumer.pending.values()),
                msgBacklog=subscription.backlog,
                type=SubType.Name(subscription.sub_type),
            )
        )

    def _attached(self, request_id: int, consumer_id: int) -> tuple[Topic, Subscription, Consumer] | None:
        """The consumer a request names; None after answering ConsumerNotFound."""
        entry = self._consumers.get(consumer_id)
        if entry is None:
            self._channel.send(commands.error(request_id, E.ConsumerNotFound, f"no consumer {consumer_id}"))
        return entry

    def attached_topics(self) -> list[Topic]:
        return [t for t, _, _ in self._consumers.values()]

    def close_by_broker(self, topics: set[str] | None, assigned: LookupUrls | None) -> None:
        """Tell the consumers of ``topics`` (all with None) to reconnect, at ``assigned`` when
        there is one (else after a lookup)."""
        for consumer_id, (topic, _, consumer) in list(self._consumers.items()):
            if topics is not None and str(topic.name) not in topics:
                continue
            consumer.close_by_broker(assigned)
            self.drop(consumer_id)

    def close(self) -> None:
        """The connection closed: its consumers leave their subscriptions."""
        for consumer_id in list(self._consumers):
            self.drop(consumer_id)


def _last_batch_index(entry: Entry) -> int:
    """The index of the last message of ``entry`` (-1: not a batch)."""
    with contextlib.suppress(FrameError):
        metadata = read_metadata(entry.data)
        if metadata.HasField("num_messages_in_batch"):
            return metadata.num_messages_in_batch - 1
    return -1


def _sticky_ranges(request: api.CommandSubscribe) -> list[tuple[int, int]]:
    """The hash ranges of a Key_Shared STICKY consumer ([] for AUTO_SPLIT and other types)."""
    if request.subType != api.CommandSubscribe.Key_Shared or not request.HasField("keySharedMeta"):
        return []
    meta = request.keySharedMeta
    if meta.keySharedMode != api.STICKY:
        return []
    if not meta.hashRanges:
        raise ConsumerAssignError("a Key_Shared STICKY consumer needs at least one hash range")
    return [(r.start, r.end) for r in meta.hashRanges]
