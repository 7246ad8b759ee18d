"""The producer side of a connection (Pulsar's ServerCnx): PRODUCER, SEND and CLOSE_PRODUCER.

Sends are written beside the connection's read loop so a slow bookie never stops it from
reading; the read loop pauses once ``max_pending_publish_requests_per_connection`` are in flight.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Protocol

from magnetar.broker.cnx.admission import producer_refusal
from magnetar.broker.cnx.channel import CommandChannel, TopicSource
from magnetar.broker.cnx.server_errors import server_error
from magnetar.broker.managed_ledger import ManagedLedgerError, ManagedLedgerTerminatedError, Position
from magnetar.broker.ownership import LookupUrls, NotServedError
from magnetar.broker.producer_access import ProducerAccessError
from magnetar.broker.protocol import commands
from magnetar.broker.protocol.commands import T
from magnetar.broker.protocol.frames import ChecksumError, Frame, FrameError, verify_payload
from magnetar.broker.schemas.compatibility import IncompatibleSchemaError
from magnetar.broker.schemas.schema_data import InvalidSchemaError
from magnetar.broker.topic import DuplicateMessage, InvalidTopicNameError, Producer, Topic, TopicFencedError
from magnetar.common.latency import LatencyHistogram
from magnetar.proto import PulsarApi_pb2 as api

E = api.ServerError
log = logging.getLogger(__name__)


class ReadOnlyRefusal(Protocol):
    """PIP-63: a read-only broker takes no producers and says where to produce instead."""

    async def refuse_producer(self, topic: str) -> str: ...


class ProducerSchemas(Protocol):
    """The schema registry, as producers meet it (broker/schemas/admission.py)."""

    async def for_producer(self, topic: str, schema: api.Schema | None) -> bytes: ...


class ProducerCommands:
    def __init__(
        self,
        channel: CommandChannel,
        topics: TopicSource,
        *,
        new_producer_name: Callable[[], str],
        max_pending: int,
        read_only: ReadOnlyRefusal | None,
        schemas: ProducerSchemas,
        publish_latency: LatencyHistogram | None = None,
    ) -> None:
        self._channel = channel
        self._publish_latency = publish_latency if publish_latency is not None else LatencyHistogram()
        self._topics = topics
        self._new_producer_name = new_producer_name
        self._max_pending = max_pending
        self._read_only = read_only
        self._schemas = schemas
        self._producers: dict[int, tuple[Topic, Producer]] = {}
        #: producers queued for exclusive access (WaitForExclusive), not attached yet
        self._waiting: dict[int, tuple[Topic, Producer]] = {}
        #: producers the broker closed (unload, transfer, shutdown): a send of theirs still on the
        #: way is dropped, not refused; the client resends it after reconnecting, while a refusal
        #: makes it drop the whole connection and wait out a backoff
        self._closed_producers: set[int] = set()
        #: sends being written; reading pauses at the limit until some complete
        self._publishing = 0
        self._room = asyncio.Event()
        self._room.set()
        #: a publish rate limit was used up: reading waits until then (monotonic)
        self._throttled_until = 0.0

    async def room(self) -> None:
        """Until fewer than the limit of sends are being written, and a topic's publish rate
        limit used up by this connection has a new window (Pulsar stops reading the connection)."""
        if not self._room.is_set():
            await self._room.wait()
        pause_s = self._throttled_until - time.monotonic()
        if pause_s > 0:
            await asyncio.sleep(pause_s)

    def must_wait(self) -> bool:
        """Whether ``room`` would wait (checked per frame, so a frame with room pays no await)."""
        return not self._room.is_set() or self._throttled_until > time.monotonic()

    def wake(self) -> None:
        """Let a read loop waiting for room go on (the connection is closing)."""
        self._room.set()

    async def producer(self, frame: Frame) -> None:
        request = frame.command.producer
        await self._channel.authorize(request.topic, "produce")
        if self._read_only is not None:
            refusal = await self._read_only.refuse_producer(request.topic)
            self._channel.send(commands.error(request.request_id, E.NotAllowedError, refusal))
            return
        try:
            topic = await self._topics.get_or_load(request.topic)
        except InvalidTopicNameError as exc:
            self._channel.send(commands.error(request.request_id, E.InvalidTopicName, str(exc)))
            return
        except (ManagedLedgerError, NotServedError) as exc:
            self._channel.send(commands.error(request.request_id, E.ServiceNotReady, str(exc)))
            return
        refused = producer_refusal(topic)
        if refused is not None:
            self._channel.send(commands.error(request.request_id, *refused))
            return
        if topic.ledger.is_terminated:
            self._channel.send(
                commands.error(request.request_id, E.TopicTerminatedError, f"{topic.name} was terminated")
            )
            return
        name = request.producer_name or self._new_producer_name()
        producer_id = request.producer_id
        producer = Producer(
            producer_id,
            name,
            self._channel.id,
            access_mode=api.ProducerAccessMode.Name(request.producer_access_mode),
            on_fenced=lambda: self._fence_out(producer_id),
        )
        if producer.is_replicator:
            # Another cluster's replicator: what it sends again after a reconnection or a
            # restart is recognised by origin and stored once (broker/replication/__init__.py).
            try:
                await topic.accept_replication()
            except ManagedLedgerError as exc:
                self._channel.send(commands.error(request.request_id, E.ServiceNotReady, str(exc)))
                return
        existing = topic.producers.get(name)
        if existing is not None and existing.connection_id != self._channel.id:
            self._channel.send(
                commands.error(request.request_id, E.ProducerBusy, f"producer {name} is already connected")
            )
            return
        if not producer.is_replicator:
            try:
                producer.schema_version = await self._schemas.for_producer(
                    str(topic.name), request.schema if request.HasField("schema") else None
                )
            except (IncompatibleSchemaError, InvalidSchemaError) as exc:
                self._channel.send(commands.error(request.request_id, E.IncompatibleSchema, str(exc)))
                return
        if producer.is_replicator:
            self._attach(topic, producer, request, None)
        elif request.producer_access_mode == api.WaitForExclusive:
            # It may wait long for its turn: the connection's other commands go on meanwhile.
            self._channel.spawn(self._admit(topic, producer, request))
        else:
            await self._admit(topic, producer, request)

    async def _admit(self, topic: Topic, producer: Producer, request: api.CommandProducer) -> None:
        """Producer access modes: admitted (with the topic epoch), queued first, or refused."""
        asked = request.topic_epoch if request.HasField("topic_epoch") else None

        def queued() -> None:
            self._waiting[producer.producer_id] = (topic, producer)
            self._success(request, producer.name, topic, None, producer.schema_version, ready=False)

        try:
            epoch = await topic.access.admit(
                producer, request.producer_access_mode, asked, topic.client_producers(), queued
            )
        except (ProducerAccessError, ManagedLedgerError) as exc:
            code = server_error(exc)
            self._channel.send(commands.error(request.request_id, code or E.UnknownError, str(exc)))
            return
        finally:
            self._waiting.pop(producer.producer_id, None)
        self._attach(topic, producer, request, epoch)

    def _attach(
        self, topic: Topic, producer: Producer, request: api.CommandProducer, epoch: int | None
    ) -> None:
        topic.producers[producer.name] = producer
        self._producers[producer.producer_id] = (topic, producer)
        self._success(request, producer.name, topic, epoch, producer.schema_version, ready=True)

    def _success(
        self,
        request: api.CommandProducer,
        name: str,
        topic: Topic,
        epoch: int | None,
        schema_version: bytes,
        *,
        ready: bool,
    ) -> None:
        self._channel.send(
            commands.command(
                T.PRODUCER_SUCCESS,
                "producer_success",
                request_id=request.request_id,
                producer_name=name,
                last_sequence_id=topic.last_sequence_id(name),
                schema_version=schema_version or None,
                topic_epoch=epoch,
                producer_ready=ready,
            )
        )

    def send(self, frame: Frame) -> None:
        """A SEND: checked, then handed to its topic, whose answer writes the receipt (no task
        or coroutine per message; the connection calls this directly, errors refuse it)."""
        received = time.perf_counter()
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
        data = frame.headers_and_payload
        messages = max(1, send.num_messages)
        producer.messages_in += messages
        producer.bytes_in += len(data)
        limiter = topic.settings.publish
        if limiter.limited:
            limiter.consume(messages, len(data))
            self._throttled_until = max(self._throttled_until, time.monotonic() + limiter.wait_s())
        done = functools.partial(self._published, topic, send, messages, len(data), received)
        topic.publish_then(data, metadata, send.sequence_id, send.highest_sequence_id, done)
        self._publishing += 1
        if self._publishing >= self._max_pending:
            self._room.clear()

    def _published(
        self,
        topic: Topic,
        send: api.CommandSend,
        messages: int,
        size: int,
        received: float,
        position: Position | None,
        error: BaseException | None,
    ) -> None:
        self._publishing -= 1
        if self._publishing < self._max_pending:
            self._room.set()
        if error is not None:
            self._publish_failed(send, error)
            return
        assert position is not None
        topic.messages_in += messages
        topic.bytes_in += size
        self._receipt(send, position)
        self._publish_latency.since(received)

    def _publish_failed(self, send: api.CommandSend, error: BaseException) -> None:
        if isinstance(error, DuplicateMessage):
            self._receipt(send, Position(-1, -1))
        elif isinstance(error, TopicFencedError):
            return  # as a send that arrives once fenced: resent to the next owner after the close
        elif isinstance(error, ManagedLedgerTerminatedError):
            self._send_error(send, E.TopicTerminatedError, str(error))
        elif isinstance(error, ManagedLedgerError):
            self._send_error(send, E.PersistenceError, str(error))
        else:
            log.error("a publish failed", exc_info=error)
            self._send_error(send, E.UnknownError, str(error) or type(error).__name__)

    def _receipt(self, send: api.CommandSend, position: Position) -> None:
        self._channel.send(
            commands.send_receipt(
                send.producer_id,
                send.sequence_id,
                position.ledger_id,
                position.entry_id,
                send.highest_sequence_id,
            )
        )

    def _send_error(self, send: api.CommandSend, code: int, message: str) -> None:
        self._channel.send(commands.send_error(send, code, message))

    async def close_producer(self, frame: Frame) -> None:
        request = frame.command.close_producer
        entry = self._producers.pop(request.producer_id, None)
        if entry is not None:
            _detach(*entry)
        self._withdraw(lambda producer_id, topic: producer_id == request.producer_id)
        self._channel.send(commands.success(request.request_id))

    def _withdraw(self, which: Callable[[int, Topic], bool]) -> None:
        """Producers still waiting for exclusive access stop waiting (their _admit answers)."""
        for producer_id, (topic, producer) in list(self._waiting.items()):
            if which(producer_id, topic):
                topic.access.withdraw(producer)

    def _fence_out(self, producer_id: int) -> None:
        """An ExclusiveWithFencing producer took the topic: this one is closed for good (its
        client reconnects with its old epoch and is refused ProducerFenced)."""
        entry = self._producers.get(producer_id)
        if entry is not None:
            self._close_by_broker(producer_id, entry, None)

    def attached_topics(self) -> list[Topic]:
        return [t for t, _ in self._producers.values()]

    def close_by_broker(self, topics: set[str] | None, assigned: LookupUrls | None) -> None:
        """Tell the producers of ``topics`` (all with None) to reconnect, at ``assigned`` when
        there is one (else after a lookup)."""
        for producer_id, entry in list(self._producers.items()):
            if topics is None or str(entry[0].name) in topics:
                self._close_by_broker(producer_id, entry, assigned)
        self._withdraw(lambda producer_id, topic: topics is None or str(topic.name) in topics)

    def _close_by_broker(
        self, producer_id: int, entry: tuple[Topic, Producer], assigned: LookupUrls | None
    ) -> None:
        self._channel.send(
            commands.command(
                T.CLOSE_PRODUCER,
                "close_producer",
                producer_id=producer_id,
                request_id=0,
                assignedBrokerServiceUrl=(assigned.url or None) if assigned else None,
                assignedBrokerServiceUrlTls=(assigned.url_tls or None) if assigned else None,
            )
        )
        del self._producers[producer_id]
        self._closed_producers.add(producer_id)
        _detach(*entry)

    def close(self) -> None:
        """The connection closed: its producers leave their topics, and none waits any more."""
        producers = list(self._producers.values())
        self._producers.clear()
        for topic, producer in producers:
            _detach(topic, producer)
        self._withdraw(lambda producer_id, topic: True)


def _detach(topic: Topic, producer: Producer) -> None:
    topic.remove_producer(producer)
