"""One client connection speaking the Pulsar binary protocol (Pulsar's ServerCnx).

Frames are read one at a time and handled in order; publishing and dispatching run beside the
read loop so a slow bookie never stops the connection from reading. A malformed frame gets an
ERROR when the stream can still be trusted, and a clean close when it cannot; either way other
connections are unaffected.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from magnetar.broker.consumer import Consumer, SubType
from magnetar.broker.managed_ledger import InitialPosition, ManagedLedgerError, Position
from magnetar.broker.namespace import NamespaceError
from magnetar.broker.ownership import NotServedError, UnknownListenerError
from magnetar.broker.protocol import commands
from magnetar.broker.protocol.commands import T
from magnetar.broker.protocol.frames import (
    FRAME_PADDING,
    ChecksumError,
    Frame,
    FrameError,
    encode,
    parse_frame,
    read_metadata,
    verify_payload,
)
from magnetar.broker.read_only.cursor import RemoteCursor
from magnetar.broker.subscription import ConsumerAssignError, Subscription, SubscriptionBusyError
from magnetar.broker.topic import DuplicateMessage, InvalidTopicNameError, Producer, Topic, TopicFencedError
from magnetar.proto import PulsarApi_pb2 as api

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService

log = logging.getLogger(__name__)

E = api.ServerError
#: the newest protocol version this broker speaks (official clients send up to 21)
PROTOCOL_VERSION = 21
SERVER_VERSION = "Magnetar 0.1.0"
_ids = itertools.count(1)


class ConnectionClosed(Exception):
    pass


class ServerConnection:
    def __init__(
        self, service: BrokerService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.service = service
        self.id = next(_ids)
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self._remote = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.protocol_version = 0
        self._connected = False
        self._producers: dict[int, tuple[Topic, Producer]] = {}
        self._consumers: dict[int, tuple[Topic, Subscription, Consumer]] = {}
        #: producers the broker closed (unload, transfer, shutdown): a send of theirs still on the
        #: way is dropped, not refused; the client resends it after reconnecting, while a refusal
        #: makes it drop the whole connection and wait out a backoff
        self._closed_producers: set[int] = set()
        self._last_read = time.monotonic()
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._handlers = self._handler_table()  # built once: it is consulted for every frame
        #: sends being written; reading pauses at the limit until some complete
        self._publishing = 0
        self._publish_room = asyncio.Event()
        self._publish_room.set()

    @property
    def remote(self) -> str:
        return self._remote

    # -- output ---------------------------------------------------------------------------------
    def send(self, command: api.BaseCommand, headers_and_payload: bytes = b"") -> None:
        if not self._closed and not self._writer.is_closing():
            self._writer.write(encode(command, headers_and_payload))

    # -- the read loop --------------------------------------------------------------------------
    async def serve(self) -> None:
        keepalive = asyncio.get_running_loop().create_task(self._keepalive())
        try:
            while not self._closed:
                frame = await self._read_frame()
                if frame is None:
                    break
                self._last_read = time.monotonic()
                await self._handle(frame)
                if self._writer.transport.get_write_buffer_size() > 1 << 20:
                    await self._writer.drain()
                if not self._publish_room.is_set():
                    await self._publish_room.wait()
        except (ConnectionError, asyncio.IncompleteReadError, ConnectionClosed):
            pass
        except Exception:
            log.exception("connection %s failed", self._remote)
        finally:
            keepalive.cancel()
            await self.close()

    async def _read_frame(self) -> Frame | None:
        try:
            header = await self._reader.readexactly(4)
        except asyncio.IncompleteReadError:
            return None
        (total,) = struct.unpack(">I", header)
        limit = self.service.config.max_message_size + FRAME_PADDING
        if total > limit:
            self._fatal(f"frame of {total} bytes exceeds the limit of {limit}")
        if total < 4:
            self._fatal(f"frame size {total} is too small")
        body = await self._reader.readexactly(total)
        try:
            return parse_frame(body)
        except FrameError as exc:
            self._fatal(str(exc))
        return None

    def _fatal(self, reason: str) -> None:
        """The stream cannot be trusted any more: say why, then close."""
        log.warning("closing connection %s: %s", self._remote, reason)
        self.send(commands.error(0, E.UnknownError, f"malformed frame: {reason}"))
        raise ConnectionClosed(reason)

    async def _keepalive(self) -> None:
        """Pulsar's keep-alive: a connection quiet for an interval gets a PING; one that sends
        nothing at all by the next interval (no PONG, no command) is closed, as is one that has
        not sent CONNECT within an interval."""
        interval = self.service.config.keep_alive_interval_seconds
        ping_sent_at: float | None = None
        while not self._closed:
            await asyncio.sleep(interval)
            now = time.monotonic()
            unanswered = ping_sent_at is not None and self._last_read < ping_sent_at
            if unanswered or not self._connected:
                why = "no answer to PING" if self._connected else "no CONNECT"
                log.info("connection %s: %s within %ds: closing", self._remote, why, interval)
                self._writer.close()
                self._publish_room.set()  # a read loop paused on publishing sees the close
                return
            ping_sent_at = None
            if now - self._last_read >= interval * 0.9:
                self.send(commands.ping())
                ping_sent_at = now

    # -- dispatch of commands -------------------------------------------------------------------
    async def _handle(self, frame: Frame) -> None:
        command = frame.command
        kind = command.type
        if not self._connected and kind != T.CONNECT:
            self.send(commands.error(0, E.NotAllowedError, f"{T.Name(kind)} before CONNECT"))
            raise ConnectionClosed("command before CONNECT")
        handler = self._handlers.get(kind)
        if handler is None:
            self.send(
                commands.error(_request_id(command), E.NotAllowedError, f"{T.Name(kind)} is not supported")
            )
            return
        if self._held_by_handover(command):
            # It waits for a transfer to end: the connection's other commands go on meanwhile
            # (a client sends nothing on a producer or consumer before the answer).
            self._spawn(handler(frame))
            return
        await handler(frame)

    def _held_by_handover(self, command: api.BaseCommand) -> bool:
        if command.type == T.PRODUCER:
            return self.service.awaits_handover(command.producer.topic)
        if command.type == T.SUBSCRIBE:
            return self.service.awaits_handover(command.subscribe.topic)
        return False

    def _handler_table(self) -> dict[int, Callable[[Frame], Awaitable[None]]]:
        return {
            T.CONNECT: self._connect,
            T.PING: self._ping,
            T.PONG: self._noop,
            T.PARTITIONED_METADATA: self._partitioned_metadata,
            T.LOOKUP: self._lookup,
            T.PRODUCER: self._producer,
            T.SEND: self._send,
            T.CLOSE_PRODUCER: self._close_producer,
            T.SUBSCRIBE: self._subscribe,
            T.FLOW: self._flow,
            T.ACK: self._ack,
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: self._redeliver,
            T.CLOSE_CONSUMER: self._close_consumer,
            T.UNSUBSCRIBE: self._unsubscribe,
            T.SEEK: self._seek,
            T.GET_LAST_MESSAGE_ID: self._last_message_id,
            T.GET_TOPICS_OF_NAMESPACE: self._topics_of_namespace,
            T.GET_SCHEMA: self._get_schema,
            T.GET_OR_CREATE_SCHEMA: self._get_or_create_schema,
            T.CONSUMER_STATS: self._consumer_stats,
        }

    async def _noop(self, frame: Frame) -> None:
        return

    async def _connect(self, frame: Frame) -> None:
        if self._connected:
            self.send(commands.error(0, E.NotAllowedError, "already connected"))
            return
        connect = frame.command.connect
        self.protocol_version = min(connect.protocol_version, PROTOCOL_VERSION)
        self._connected = True
        self.send(
            commands.command(
                T.CONNECTED,
                "connected",
                server_version=SERVER_VERSION,
                protocol_version=self.protocol_version,
                max_message_size=self.service.config.max_message_size,
            )
        )

    async def _ping(self, frame: Frame) -> None:
        self.send(commands.pong())

    async def _partitioned_metadata(self, frame: Frame) -> None:
        request = frame.command.partitionMetadata
        self.send(
            commands.command(
                T.PARTITIONED_METADATA_RESPONSE,
                "partitionMetadataResponse",
                request_id=request.request_id,
                partitions=0,
                response=api.CommandPartitionedTopicMetadataResponse.Success,
            )
        )

    async def _lookup(self, frame: Frame) -> None:
        request = frame.command.lookupTopic
        try:
            url, redirect = await self.service.lookup(
                request.topic,
                authoritative=request.authoritative,
                listener=request.advertised_listener_name or None,
            )
        except (UnknownListenerError, NotServedError) as exc:
            self._lookup_failed(request.request_id, E.ServiceNotReady, str(exc))
            return
        except (InvalidTopicNameError, NamespaceError) as exc:
            self._lookup_failed(request.request_id, E.TopicNotFound, str(exc))
            return
        kind = api.CommandLookupTopicResponse
        self.send(
            commands.command(
                T.LOOKUP_RESPONSE,
                "lookupTopicResponse",
                request_id=request.request_id,
                brokerServiceUrl=url,
                response=kind.Redirect if redirect else kind.Connect,
                authoritative=True,
            )
        )

    def _lookup_failed(self, request_id: int, error: int, message: str) -> None:
        self.send(
            commands.command(
                T.LOOKUP_RESPONSE,
                "lookupTopicResponse",
                request_id=request_id,
                response=api.CommandLookupTopicResponse.Failed,
                error=error,
                message=message,
            )
        )

    # -- producing ------------------------------------------------------------------------------
    async def _producer(self, frame: Frame) -> None:
        request = frame.command.producer
        if self.service.config.read_only_broker:
            url = await self.service.writable_service_url(request.topic)
            self.send(
                commands.error(
                    request.request_id,
                    E.NotAllowedError,
                    f"{self.service.service_url} is a read-only broker (PIP-63) and takes no producers: "
                    f"produce to {request.topic} through the writable brokers at {url}",
                )
            )
            return
        try:
            topic = await self.service.topic(request.topic)
        except InvalidTopicNameError as exc:
            self.send(commands.error(request.request_id, E.InvalidTopicName, str(exc)))
            return
        except (ManagedLedgerError, NotServedError) as exc:
            self.send(commands.error(request.request_id, E.ServiceNotReady, str(exc)))
            return
        name = request.producer_name or self.service.new_producer_name()
        if name.startswith("pulsar.repl."):
            # Another cluster's replicator: what it sends again after a reconnection or a
            # restart is recognised by origin and stored once (broker/replication/__init__.py).
            try:
                await topic.accept_replication()
            except ManagedLedgerError as exc:
                self.send(commands.error(request.request_id, E.ServiceNotReady, str(exc)))
                return
        existing = topic.producers.get(name)
        if existing is not None and existing.connection_id != self.id:
            self.send(
                commands.error(request.request_id, E.ProducerBusy, f"producer {name} is already connected")
            )
            return
        producer = Producer(request.producer_id, name, self.id)
        topic.producers[name] = producer
        self._producers[request.producer_id] = (topic, producer)
        self.send(
            commands.command(
                T.PRODUCER_SUCCESS,
                "producer_success",
                request_id=request.request_id,
                producer_name=name,
                last_sequence_id=topic.last_sequence_id(name),
            )
        )

    async def _send(self, frame: Frame) -> None:
        send = frame.command.send
        entry = self._producers.get(send.producer_id)
        if entry is None:
            if send.producer_id in self._closed_producers:
                return
            self._send_error(send, E.UnknownError, f"no producer {send.producer_id} on this connection")
            return
        try:
            metadata = verify_payload(frame.headers_and_payload)
        except ChecksumError as exc:
            self._send_error(send, E.ChecksumError, str(exc))
            return
        except FrameError as exc:
            self._send_error(send, E.UnknownError, str(exc))
            return
        topic, producer = entry
        if topic.fenced:
            return  # being handed over: the client resends it to the new owner after reconnecting
        producer.messages_in += max(1, send.num_messages)
        producer.bytes_in += len(frame.headers_and_payload)
        self._publishing += 1
        if self._publishing >= self.service.config.max_pending_publish_requests_per_connection:
            self._publish_room.clear()
        self._spawn(self._publish(topic, send, metadata, frame.headers_and_payload))

    async def _publish(
        self, topic: Topic, send: api.CommandSend, metadata: api.MessageMetadata, data: bytes
    ) -> None:
        try:
            position = await topic.publish(data, metadata, send.sequence_id, send.highest_sequence_id)
        except DuplicateMessage:
            self._receipt(send, Position(-1, -1))
            return
        except TopicFencedError:
            return  # as a send that arrives once fenced: resent to the next owner after the close
        except ManagedLedgerError as exc:
            self._send_error(send, E.PersistenceError, str(exc))
            return
        finally:
            self._publishing -= 1
            if self._publishing < self.service.config.max_pending_publish_requests_per_connection:
                self._publish_room.set()
        topic.messages_in += max(1, send.num_messages)
        topic.bytes_in += len(data)
        self._receipt(send, position)

    def _receipt(self, send: api.CommandSend, position: Position) -> None:
        self.send(
            commands.command(
                T.SEND_RECEIPT,
                "send_receipt",
                producer_id=send.producer_id,
                sequence_id=send.sequence_id,
                message_id=commands.message_id(position.ledger_id, position.entry_id),
                highest_sequence_id=send.highest_sequence_id,
            )
        )

    def _send_error(self, send: api.CommandSend, code: int, message: str) -> None:
        self.send(
            commands.command(
                T.SEND_ERROR,
                "send_error",
                producer_id=send.producer_id,
                sequence_id=send.sequence_id,
                error=code,
                message=message,
            )
        )

    async def _close_producer(self, frame: Frame) -> None:
        request = frame.command.close_producer
        entry = self._producers.pop(request.producer_id, None)
        if entry is not None:
            topic, producer = entry
            if topic.producers.get(producer.name) is producer:
                del topic.producers[producer.name]
        self.send(commands.success(request.request_id))

    # -- consuming ------------------------------------------------------------------------------
    async def _subscribe(self, frame: Frame) -> None:
        request = frame.command.subscribe
        existing = self._consumers.get(request.consumer_id)
        if existing is not None:
            if not existing[2].closed:
                self.send(commands.success(request.request_id))  # a retry of a subscribe that worked
                return
            # Closed by the broker (a seek from another connection): this is its reconnection.
            self._drop_consumer(request.consumer_id)
        try:
            topic = await self.service.topic(request.topic)
            subscription = await self._subscription(topic, request)
            consumer = Consumer(
                request.consumer_id,
                request.consumer_name or f"consumer-{request.consumer_id}",
                self,
                request.subType,
                request.priority_level,
                sticky_ranges=_sticky_ranges(request),
            )
            subscription.add_consumer(consumer)
        except InvalidTopicNameError as exc:
            self.send(commands.error(request.request_id, E.InvalidTopicName, str(exc)))
            return
        except SubscriptionBusyError as exc:
            self.send(commands.error(request.request_id, E.ConsumerBusy, str(exc)))
            return
        except ConsumerAssignError as exc:
            self.send(commands.error(request.request_id, E.ConsumerAssignError, str(exc)))
            return
        except (ManagedLedgerError, NotServedError) as exc:
            self.send(commands.error(request.request_id, E.ServiceNotReady, str(exc)))
            return
        self._consumers[request.consumer_id] = (topic, subscription, consumer)
        self.send(commands.success(request.request_id))

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

    async def _flow(self, frame: Frame) -> None:
        flow = frame.command.flow
        entry = self._consumers.get(flow.consumer_id)
        if entry is not None:
            _, subscription, consumer = entry
            subscription.dispatcher.add_permits(consumer, flow.messagePermits)

    async def _ack(self, frame: Frame) -> None:
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
            self.send(
                commands.command(
                    T.ACK_RESPONSE,
                    "ackResponse",
                    consumer_id=ack.consumer_id,
                    request_id=ack.request_id,
                    error=error,
                    message=message,
                )
            )

    async def _redeliver(self, frame: Frame) -> None:
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

    async def _close_consumer(self, frame: Frame) -> None:
        request = frame.command.close_consumer
        self._drop_consumer(request.consumer_id)
        self.send(commands.success(request.request_id))

    def _drop_consumer(self, consumer_id: int) -> None:
        entry = self._consumers.pop(consumer_id, None)
        if entry is None:
            return
        topic, subscription, consumer = entry
        consumer.closed = True
        subscription.remove_consumer(consumer)
        if not subscription.durable and not subscription.consumers:
            topic.subscriptions.pop(subscription.name, None)
            self._spawn(subscription.close())

    async def _unsubscribe(self, frame: Frame) -> None:
        request = frame.command.unsubscribe
        entry = self._consumers.get(request.consumer_id)
        if entry is None:
            self.send(
                commands.error(request.request_id, E.ConsumerNotFound, f"no consumer {request.consumer_id}")
            )
            return
        topic, subscription, consumer = entry
        others = [c for c in subscription.consumers if c is not consumer]
        if others and not request.force:
            self.send(
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
            self.send(commands.error(request.request_id, E.UnknownError, f"unsubscribe failed: {exc}"))
            return
        self.send(commands.success(request.request_id))

    async def _seek(self, frame: Frame) -> None:
        request = frame.command.seek
        entry = self._consumers.get(request.consumer_id)
        if entry is None:
            self.send(
                commands.error(request.request_id, E.ConsumerNotFound, f"no consumer {request.consumer_id}")
            )
            return
        topic, subscription, _ = entry
        if request.HasField("message_publish_time"):
            at = request.message_publish_time

            def published_since(candidate: object) -> bool:
                try:
                    return read_metadata(candidate.data).publish_time >= at  # type: ignore[attr-defined]
                except FrameError:
                    return False

            found = await topic.ledger.find_first_position(published_since)
            last = await topic.last_dispatchable_position()
            position = found or (topic.ledger.next_position(last) if last else topic.ledger.first_position())
        else:
            m = request.message_id
            ledger_id, entry_id = commands.signed(m.ledgerId), commands.signed(m.entryId)
            position = topic.ledger.first_position() if ledger_id < 0 else Position(ledger_id, entry_id)
        for consumer_id in [cid for cid, (_, s, _) in self._consumers.items() if s is subscription]:
            self._consumers.pop(consumer_id, None)
        try:
            await subscription.seek(position)
        except ManagedLedgerError as exc:
            self.send(commands.error(request.request_id, E.UnknownError, f"seek failed: {exc}"))
            return
        # As Pulsar: the consumers were closed first, the answer comes once the cursor is reset.
        self.send(commands.success(request.request_id))

    async def _last_message_id(self, frame: Frame) -> None:
        request = frame.command.getLastMessageId
        entry = self._consumers.get(request.consumer_id)
        if entry is None:
            self.send(
                commands.error(request.request_id, E.ConsumerNotFound, f"no consumer {request.consumer_id}")
            )
            return
        topic, subscription, _ = entry
        last = await topic.last_dispatchable_position()
        if last is None:
            message_id = commands.message_id(-1, -1)
        else:
            batch_index = -1
            stored = await topic.ledger.read_entry(last)
            if stored is not None:
                with contextlib.suppress(FrameError):
                    size = read_metadata(stored.data).num_messages_in_batch
                    batch_index = (
                        size - 1 if read_metadata(stored.data).HasField("num_messages_in_batch") else -1
                    )
            message_id = commands.message_id(last.ledger_id, last.entry_id, -1, batch_index)
        mark = subscription.cursor.mark_delete_position
        self.send(
            commands.command(
                T.GET_LAST_MESSAGE_ID_RESPONSE,
                "getLastMessageIdResponse",
                request_id=request.request_id,
                last_message_id=message_id,
                consumer_mark_delete_position=commands.message_id(mark.ledger_id, mark.entry_id),
            )
        )

    async def _topics_of_namespace(self, frame: Frame) -> None:
        request = frame.command.getTopicsOfNamespace
        topics = await self.service.topics_of_namespace(request.namespace)
        self.send(
            commands.command(
                T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
                "getTopicsOfNamespaceResponse",
                request_id=request.request_id,
                topics=topics,
            )
        )

    async def _get_schema(self, frame: Frame) -> None:
        request = frame.command.getSchema
        self.send(
            commands.command(
                T.GET_SCHEMA_RESPONSE,
                "getSchemaResponse",
                request_id=request.request_id,
                error_code=E.TopicNotFound,
                error_message=f"no schema for {request.topic}: Magnetar stores bytes",
            )
        )

    async def _get_or_create_schema(self, frame: Frame) -> None:
        request = frame.command.getOrCreateSchema
        self.send(
            commands.command(
                T.GET_OR_CREATE_SCHEMA_RESPONSE,
                "getOrCreateSchemaResponse",
                request_id=request.request_id,
                schema_version=b"",
            )
        )

    async def _consumer_stats(self, frame: Frame) -> None:
        request = frame.command.consumerStats
        entry = self._consumers.get(request.consumer_id)
        if entry is None:
            self.send(
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
        self.send(
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

    # -- lifecycle ------------------------------------------------------------------------------
    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def attached_topics(self) -> list[Topic]:
        """The topics this connection's producers and consumers are attached to."""
        return [t for t, _ in self._producers.values()] + [t for t, _, _ in self._consumers.values()]

    def close_producers_and_consumers(
        self, topics: set[str] | None = None, assigned_broker_url: str | None = None
    ) -> None:
        """The broker lets go of ``topics`` (all with None): unload, transfer, shutdown. The
        clients are told to reconnect, at ``assigned_broker_url`` when there is one."""
        for producer_id, (topic, producer) in list(self._producers.items()):
            if topics is not None and str(topic.name) not in topics:
                continue
            self.send(
                commands.command(
                    T.CLOSE_PRODUCER,
                    "close_producer",
                    producer_id=producer_id,
                    request_id=0,
                    assignedBrokerServiceUrl=assigned_broker_url,
                )
            )
            del self._producers[producer_id]
            self._closed_producers.add(producer_id)
            if topic.producers.get(producer.name) is producer:
                del topic.producers[producer.name]
        for consumer_id, (topic, _, consumer) in list(self._consumers.items()):
            if topics is not None and str(topic.name) not in topics:
                continue
            consumer.close_by_broker(assigned_broker_url)
            self._drop_consumer(consumer_id)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for topic, producer in self._producers.values():
            if topic.producers.get(producer.name) is producer:
                del topic.producers[producer.name]
        for consumer_id in list(self._consumers):
            self._drop_consumer(consumer_id)
        self._producers.clear()
        with contextlib.suppress(Exception):
            self._writer.close()
        self.service.forget(self)


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


def _request_id(command: api.BaseCommand) -> int:
    """The request id of any command that has one (for ERROR answers), else 0."""
    for field, value in command.ListFields():
        if field.name != "type" and hasattr(value, "request_id"):
            return int(value.request_id)
    return 0
