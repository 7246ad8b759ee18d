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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from magnetar import __version__
from magnetar.broker.authorization import Authorization
from magnetar.broker.cnx.auth_refresh import AuthenticationRefresh
from magnetar.broker.cnx.channel import TopicSource
from magnetar.broker.cnx.consumer_commands import CompactedReads, ConsumerCommands
from magnetar.broker.cnx.creations import CreationKey, Creations
from magnetar.broker.cnx.producer_commands import ProducerCommands, ReadOnlyRefusal
from magnetar.broker.cnx.schema_commands import SchemaCommands
from magnetar.broker.cnx.server_errors import server_error
from magnetar.broker.config import BrokerConfig
from magnetar.broker.namespace import NamespaceError
from magnetar.broker.ownership import (
    BrokerInfo,
    LookupUrls,
    NotServedError,
    UnknownListenerError,
    lookup_urls,
)
from magnetar.broker.protocol import commands
from magnetar.broker.protocol.commands import T
from magnetar.broker.protocol.frames import FRAME_PADDING, Frame, FrameError, encode, parse_frame
from magnetar.broker.schemas.admission import SchemaAdmission
from magnetar.broker.topic import NON_PERSISTENT, PERSISTENT, InvalidTopicNameError, Topic, TopicName
from magnetar.common.authentication.providers import Authentication, AuthenticationFailed
from magnetar.common.background import BackgroundTasks
from magnetar.common.latency import LatencyHistogram
from magnetar.common.tls import peer_common_name
from magnetar.proto import PulsarApi_pb2 as api

log = logging.getLogger(__name__)

E = api.ServerError
#: the newest protocol version this broker speaks (official clients send up to 21)
PROTOCOL_VERSION = 21
SERVER_VERSION = f"Magnetar {__version__}"
_ids = itertools.count(1)
_U32 = struct.Struct(">I")
#: the most a read takes from the socket's buffer at once
_READ_SIZE = 1 << 16


class ConnectionClosed(Exception):
    pass


class Lookups(Protocol):
    """The bundles' side of a connection: where topics are served."""

    async def lookup(
        self, topic: str, *, authoritative: bool = False, listener: str | None = None
    ) -> tuple[LookupUrls, bool]: ...


class NamespaceTopics(Protocol):
    async def topics_of_namespace(self, namespace: str, domains: Sequence[str] = ...) -> list[str]: ...


class PartitionCounts(Protocol):
    """How many partitions a topic has (0: not partitioned): broker/partitions.py."""

    async def partitions(self, topic: str) -> int: ...


@dataclass(frozen=True)
class ConnectionDeps:
    """What a connection is given by the broker."""

    config: BrokerConfig
    topics: TopicSource
    namespace_topics: NamespaceTopics
    partitioned: PartitionCounts
    lookups: Lookups
    new_producer_name: Callable[[], str]
    #: the schema registry, as producers, consumers and the schema commands use it
    schemas: SchemaAdmission
    #: topic compaction, for read_compacted consumers
    compactions: CompactedReads
    #: PIP-63: set on a read-only broker, which refuses producers
    read_only: ReadOnlyRefusal | None = None
    #: who a connection's CONNECT proves it is (authentication_enabled), and what it may do
    authentication: Authentication = field(default_factory=Authentication)
    authorization: Authorization | None = None
    #: SEND to SEND_RECEIPT, every connection's (the broker's /metrics)
    publish_latency: LatencyHistogram = field(default_factory=LatencyHistogram)


class ServerConnection:
    def __init__(
        self,
        deps: ConnectionDeps,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_close: Callable[[ServerConnection], None],
    ) -> None:
        self._deps = deps
        self._config = deps.config
        self._on_close = on_close
        self._id = next(_ids)
        self._reader = reader
        self._writer = writer
        #: bytes read and not yet a whole frame
        self._inbound = bytearray()
        peer = writer.get_extra_info("peername")
        self.ip = str(peer[0]) if peer else "?"
        self._remote = f"{peer[0]}:{peer[1]}" if peer else "?"
        #: the listener this client reaches brokers by: the one its lookups name, else the one
        #: advertised at the address it connected to (where a transfer sends it: its listener's
        #: address of the next owner, not the default one it may not be able to resolve)
        self._listener = _listener_of(deps.config, writer.get_extra_info("sockname"))
        #: the CN of the client certificate a TLS port verified (the tls provider's role)
        self._tls_common_name = peer_common_name(writer.get_extra_info("ssl_object"))
        self.protocol_version = 0
        #: the role its CONNECT proved (None while authentication is off)
        self.role: str | None = None
        self._connected = False
        self._last_read = time.monotonic()
        self._closed = False
        #: frames sent in this loop turn, written together at its end (``_flush``)
        self._outgoing: list[bytes] = []
        self._loop = asyncio.get_running_loop()
        self._tasks = BackgroundTasks()
        #: producers and consumers being created, beside the connection's other commands
        self._creations = Creations()
        self._producers = ProducerCommands(
            self,
            deps.topics,
            new_producer_name=deps.new_producer_name,
            max_pending=deps.config.max_pending_publish_requests_per_connection,
            read_only=deps.read_only,
            schemas=deps.schemas,
            publish_latency=deps.publish_latency,
        )
        self._consumers = ConsumerCommands(self, deps.topics, deps.schemas, deps.compactions)
        self._schemas = SchemaCommands(self, deps.schemas)
        self._handlers = self._handler_table()  # built once: it is consulted for every frame
        #: expiring credentials challenged (auth_refresh.py), once CONNECT proved some
        self._refresh: AuthenticationRefresh | None = None
        self._refresh_task: asyncio.Task[None] | None = None

    @property
    def id(self) -> int:
        return self._id

    @property
    def remote(self) -> str:
        return self._remote

    # -- output ---------------------------------------------------------------------------------
    def send(self, command: api.BaseCommand, headers_and_payload: bytes = b"") -> None:
        """Queue a frame; the frames of one loop turn go out in one write (a publish's receipts
        are answered by the same bookie response, a dispatch's messages by the same read)."""
        if self._closed or self._writer.is_closing():
            return
        self._outgoing.append(encode(command, headers_and_payload))
        if len(self._outgoing) == 1:
            self._loop.call_soon(self._flush)

    def _close_socket(self) -> None:
        """Close after writing what ``send`` queued, so a reason sent just before still arrives."""
        self._flush()
        self._writer.close()

    def _flush(self) -> None:
        """Write what ``send`` queued."""
        if not self._outgoing:
            return
        frames, self._outgoing = self._outgoing, []
        if not self._writer.is_closing():
            self._writer.write(frames[0] if len(frames) == 1 else b"".join(frames))

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
                if self._producers.must_wait():
                    await self._producers.room()
        except (ConnectionError, asyncio.IncompleteReadError, ConnectionClosed):
            pass
        except Exception:
            log.exception("connection %s failed", self._remote)
        finally:
            keepalive.cancel()
            await self.close()

    async def _read_frame(self) -> Frame | None:
        """The next frame, from what the socket has delivered: a read takes whatever is there
        (often several frames at once), and the frames it holds are taken without waiting
        again, instead of two waits per frame for its size and its body."""
        buffer = self._inbound
        while True:
            if len(buffer) >= 4:
                (total,) = _U32.unpack_from(buffer, 0)
                limit = self._config.max_message_size + FRAME_PADDING
                if total > limit:
                    self._fatal(f"frame of {total} bytes exceeds the limit of {limit}")
                if total < 4:
                    self._fatal(f"frame size {total} is too small")
                if len(buffer) >= 4 + total:
                    body = bytes(buffer[4 : 4 + total])
                    del buffer[: 4 + total]
                    try:
                        return parse_frame(body)
                    except FrameError as exc:
                        self._fatal(str(exc))
            chunk = await self._reader.read(_READ_SIZE)
            if not chunk:
                if buffer:
                    raise asyncio.IncompleteReadError(bytes(buffer), None)
                return None
            buffer += chunk

    def _fatal(self, reason: str) -> None:
        """The stream cannot be trusted any more: say why, then close."""
        log.warning("closing connection %s: %s", self._remote, reason)
        self.send(commands.error(0, E.UnknownError, f"malformed frame: {reason}"))
        raise ConnectionClosed(reason)

    async def _keepalive(self) -> None:
        """Pulsar's keep-alive: a connection quiet for an interval gets a PING; one that sends
        nothing at all by the next interval (no PONG, no command) is closed, as is one that has
        not sent CONNECT within an interval."""
        interval = self._config.keep_alive_interval_seconds
        ping_sent_at: float | None = None
        while not self._closed:
            await asyncio.sleep(interval)
            now = time.monotonic()
            unanswered = ping_sent_at is not None and self._last_read < ping_sent_at
            if unanswered or not self._connected:
                why = "no answer to PING" if self._connected else "no CONNECT"
                log.info("connection %s: %s within %ds: closing", self._remote, why, interval)
                self._close_socket()
                self._producers.wake()  # a read loop paused on publishing sees the close
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
        if kind == T.SEND:  # the hot path: a plain call, no coroutine per message
            try:
                self._producers.send(frame)
            except Exception as exc:
                self._refuse(command, exc)
            return
        handler = self._handlers.get(kind)
        if handler is None:
            self.send(
                commands.error(_request_id(command), E.NotAllowedError, f"{T.Name(kind)} is not supported")
            )
            return
        key = _creation_key(command)
        if kind in _CREATES:
            assert key is not None
            if self._creations.pending(key):
                message = f"{key[0]} {key[1]} is already being created on this connection"
                self.send(commands.error(_request_id(command), E.ServiceNotReady, message))
                return
            self._creations.start(key, self._create(handler, frame))
            return
        if key is not None and self._creations.pending(key):  # a close: after the creation
            self.spawn(self._after_creation(key, handler, frame))
            return
        if kind in _QUERIES:
            self.spawn(self._guarded(handler, frame))
            return
        await self._guarded(handler, frame)

    async def _create(self, handler: Callable[[Frame], Awaitable[None]], frame: Frame) -> None:
        await self._guarded(handler, frame)
        if self._closed:  # closed while it was created: what it attached leaves again
            self._producers.close()
            self._consumers.close()

    async def _after_creation(
        self, key: CreationKey, handler: Callable[[Frame], Awaitable[None]], frame: Frame
    ) -> None:
        await self._creations.settled(key)
        await self._guarded(handler, frame)

    async def _guarded(self, handler: Callable[[Frame], Awaitable[None]], frame: Frame) -> None:
        """Run a command's handler; whatever it fails with fails that command alone."""
        try:
            await handler(frame)
        except ConnectionClosed:
            raise
        except Exception as exc:
            self._refuse(frame.command, exc)

    def _refuse(self, command: api.BaseCommand, exc: Exception) -> None:
        code = server_error(exc)
        name = T.Name(command.type)
        if code is None:
            log.error("connection %s: %s failed", self._remote, name, exc_info=exc)
            code = E.UnknownError
        else:
            log.warning("connection %s: %s refused: %s", self._remote, name, exc)
        message = str(exc) or type(exc).__name__
        if command.type == T.LOOKUP:
            self._lookup_failed(command.lookupTopic.request_id, code, message)
        elif command.type == T.SEND:
            self.send(commands.send_error(command.send, code, message))
        elif command.type == T.PARTITIONED_METADATA:
            self.send(
                commands.command(
                    T.PARTITIONED_METADATA_RESPONSE,
                    "partitionMetadataResponse",
                    request_id=command.partitionMetadata.request_id,
                    response=api.CommandPartitionedTopicMetadataResponse.Failed,
                    error=code,
                    message=message,
                )
            )
        else:
            self.send(commands.error(_request_id(command), code, message))

    def _handler_table(self) -> dict[int, Callable[[Frame], Awaitable[None]]]:
        return {
            T.CONNECT: self._connect,
            T.PING: self._ping,
            T.AUTH_RESPONSE: self._auth_response,
            T.PONG: self._noop,
            T.PARTITIONED_METADATA: self._partitioned_metadata,
            T.LOOKUP: self._lookup,
            T.PRODUCER: self._producers.producer,
            T.CLOSE_PRODUCER: self._producers.close_producer,
            T.SUBSCRIBE: self._consumers.subscribe,
            T.FLOW: self._consumers.flow,
            T.ACK: self._consumers.ack,
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: self._consumers.redeliver,
            T.CLOSE_CONSUMER: self._consumers.close_consumer,
            T.UNSUBSCRIBE: self._consumers.unsubscribe,
            T.SEEK: self._consumers.seek,
            T.GET_LAST_MESSAGE_ID: self._consumers.last_message_id,
            T.GET_TOPICS_OF_NAMESPACE: self._topics_of_namespace,
            T.GET_SCHEMA: self._schemas.get_schema,
            T.GET_OR_CREATE_SCHEMA: self._schemas.get_or_create_schema,
            T.CONSUMER_STATS: self._consumers.consumer_stats,
        }

    async def _noop(self, frame: Frame) -> None:
        return

    async def _connect(self, frame: Frame) -> None:
        if self._connected:
            self.send(commands.error(0, E.NotAllowedError, "already connected"))
            return
        connect = frame.command.connect
        try:
            # Off the loop: a basic provider's bcrypt check takes tens of milliseconds.
            self.role = await asyncio.to_thread(
                self._deps.authentication.authenticate,
                connect.auth_method_name,
                connect.auth_data,
                self._tls_common_name,
            )
        except AuthenticationFailed as exc:
            log.warning("connection %s: authentication failed: %s", self._remote, exc)
            self.send(commands.error(2**64 - 1, E.AuthenticationError, f"authentication failed: {exc}"))
            raise ConnectionClosed(f"authentication failed: {exc}") from None
        self.protocol_version = min(connect.protocol_version, PROTOCOL_VERSION)
        self._connected = True
        self._watch_expiry(connect.auth_method_name, connect.auth_data)
        self.send(
            commands.command(
                T.CONNECTED,
                "connected",
                server_version=SERVER_VERSION,
                protocol_version=self.protocol_version,
                max_message_size=self._config.max_message_size,
            )
        )

    def _watch_expiry(self, method: str, data: bytes) -> None:
        interval = self._config.authentication_refresh_check_seconds
        if not self._deps.authentication.enabled or interval <= 0:
            return
        self._refresh = AuthenticationRefresh(
            self._deps.authentication,
            self,
            interval_s=interval,
            server_version=SERVER_VERSION,
            protocol_version=self.protocol_version,
        )
        self._refresh.connected(method, data, self.role)
        self._refresh_task = asyncio.get_running_loop().create_task(self._refresh.run())

    async def _auth_response(self, frame: Frame) -> None:
        if self._refresh is None:
            self.send(commands.error(0, E.NotAllowedError, "no AUTH_CHALLENGE was sent on this connection"))
            return
        await self._refresh.answered(frame.command.authResponse)

    def close_for(self, reason: str) -> None:
        """Authentication says the connection must go: tell the client why, then close."""
        log.warning("closing connection %s: %s", self._remote, reason)
        self.send(commands.error(2**64 - 1, E.AuthenticationError, reason))
        self._close_socket()
        self._producers.wake()  # a read loop paused on publishing sees the close

    async def _ping(self, frame: Frame) -> None:
        self.send(commands.pong())

    async def authorize(self, topic: str, *actions: str, subscription: str | None = None) -> None:
        if self._deps.authorization is not None:
            await self._deps.authorization.check_topic(
                self.role, TopicName.parse(topic), *actions, subscription=subscription
            )

    async def _partitioned_metadata(self, frame: Frame) -> None:
        request = frame.command.partitionMetadata
        await self.authorize(request.topic, "produce", "consume")
        partitions = await self._deps.partitioned.partitions(request.topic)
        self.send(
            commands.command(
                T.PARTITIONED_METADATA_RESPONSE,
                "partitionMetadataResponse",
                request_id=request.request_id,
                partitions=partitions,
                response=api.CommandPartitionedTopicMetadataResponse.Success,
            )
        )

    async def _lookup(self, frame: Frame) -> None:
        request = frame.command.lookupTopic
        await self.authorize(request.topic, "produce", "consume")
        if request.advertised_listener_name:
            self._listener = request.advertised_listener_name
        try:
            urls, redirect = await self._deps.lookups.lookup(
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
                brokerServiceUrl=urls.url,
                brokerServiceUrlTls=urls.url_tls,
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

    async def _topics_of_namespace(self, frame: Frame) -> None:
        request = frame.command.getTopicsOfNamespace
        if self._deps.authorization is not None:
            await self._deps.authorization.check_namespace(self.role, request.namespace, "produce", "consume")
        domains = _DOMAINS_OF_MODE.get(request.mode, PERSISTENT)
        topics = await self._deps.namespace_topics.topics_of_namespace(request.namespace, domains)
        self.send(
            commands.command(
                T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
                "getTopicsOfNamespaceResponse",
                request_id=request.request_id,
                topics=topics,
            )
        )

    # -- lifecycle ------------------------------------------------------------------------------
    def spawn(self, work: Awaitable[None]) -> None:
        # A coroutine runs as its own task (one per SEND: no wrapper frame, and a stall is named
        # for it); other awaitables are wrapped.
        self._tasks.spawn(work if asyncio.iscoroutine(work) else _awaited(work))

    def attached_topics(self) -> list[Topic]:
        """The topics this connection's producers and consumers are attached to."""
        return self._producers.attached_topics() + self._consumers.attached_topics()

    def close_producers_and_consumers(
        self, topics: set[str] | None = None, assigned: BrokerInfo | None = None
    ) -> None:
        """The broker lets go of ``topics`` (all with None): unload, transfer, shutdown. The
        clients are told to reconnect, at ``assigned``'s address on their listener when there
        is one."""
        urls = self._assigned_urls(assigned) if assigned is not None else None
        self._producers.close_by_broker(topics, urls)
        self._consumers.close_by_broker(topics, urls)

    def _assigned_urls(self, assigned: BrokerInfo) -> LookupUrls:
        try:
            return lookup_urls(assigned, self._listener)
        except UnknownListenerError:
            # Brokers of one cluster advertise the same listeners; one that does not is still
            # better named by its default address than not at all (the client looks up then).
            return lookup_urls(assigned, None)

    def close_producers(self, topics: set[str]) -> None:
        """Producers of ``topics`` reconnect (a backlog quota: they are held or refused then)."""
        self._producers.close_by_broker(topics, None)

    async def refuse(self, reason: str) -> None:
        """Turn the connection away before reading anything (a connection limit): say why."""
        log.warning("refusing connection %s: %s", self._remote, reason)
        self.send(commands.error(0, E.ServiceNotReady, f"connection refused: {reason}"))
        self._flush()
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._refresh_task is not None:
            self._refresh_task.cancel()
        self._producers.close()
        self._consumers.close()
        with contextlib.suppress(Exception):
            self._close_socket()
        self._on_close(self)


class Connections:
    """The broker's open connections (topics.Clients: telling a topic's clients to go), within
    Pulsar's ``brokerMaxConnections`` and ``brokerMaxConnectionsPerIp`` (0: no limit)."""

    def __init__(self, max_connections: int = 0, max_per_ip: int = 0) -> None:
        self._open: set[ServerConnection] = set()
        self._max = max_connections
        self._max_per_ip = max_per_ip
        self._per_ip: dict[str, int] = {}

    def refusal(self, ip: str) -> str | None:
        """Why a new connection from ``ip`` is refused, or None when it is accepted."""
        if self._max and len(self._open) >= self._max:
            return f"the broker has {len(self._open)} connections (broker_max_connections)"
        if self._max_per_ip and self._per_ip.get(ip, 0) >= self._max_per_ip:
            return f"{ip} has {self._per_ip[ip]} connections (broker_max_connections_per_ip)"
        return None

    def add(self, connection: ServerConnection) -> None:
        self._open.add(connection)
        self._per_ip[connection.ip] = self._per_ip.get(connection.ip, 0) + 1

    def discard(self, connection: ServerConnection) -> None:
        if connection not in self._open:
            return
        self._open.discard(connection)
        left = self._per_ip.pop(connection.ip, 1) - 1
        if left > 0:
            self._per_ip[connection.ip] = left

    def __len__(self) -> int:
        return len(self._open)

    def close_clients(self, topics: set[str] | None, assigned: BrokerInfo | None) -> None:
        for connection in list(self._open):
            connection.close_producers_and_consumers(topics, assigned)

    def close_producers(self, topics: set[str]) -> None:
        for connection in list(self._open):
            connection.close_producers(topics)

    def attached_topics(self) -> list[Topic]:
        return [t for connection in list(self._open) for t in connection.attached_topics()]

    async def close(self) -> None:
        """At a broker's stop: tell every client to go, then close the sockets."""
        self.close_clients(None, None)
        await asyncio.sleep(0.05)  # let the close commands leave before the sockets go
        for connection in list(self._open):
            await connection.close()


async def _awaited(work: Awaitable[None]) -> None:
    await work


#: commands that create a producer or a consumer (broker/cnx/creations.py)
_CREATES = frozenset({T.PRODUCER, T.SUBSCRIBE})
#: requests answered by request id that may wait on the metadata store or a topic's load: they
#: run beside the connection's other commands, as Pulsar's ServerCnx answers them when done
_QUERIES = frozenset(
    {T.LOOKUP, T.PARTITIONED_METADATA, T.GET_TOPICS_OF_NAMESPACE, T.GET_SCHEMA, T.GET_OR_CREATE_SCHEMA}
)


def _creation_key(command: api.BaseCommand) -> CreationKey | None:
    """The producer or consumer a create or close command is about."""
    if command.type == T.PRODUCER:
        return ("producer", command.producer.producer_id)
    if command.type == T.CLOSE_PRODUCER:
        return ("producer", command.close_producer.producer_id)
    if command.type == T.SUBSCRIBE:
        return ("consumer", command.subscribe.consumer_id)
    if command.type == T.CLOSE_CONSUMER:
        return ("consumer", command.close_consumer.consumer_id)
    return None


#: GET_TOPICS_OF_NAMESPACE's mode (a pattern consumer's RegexSubscriptionMode): which domains
_DOMAINS_OF_MODE: dict[int, Sequence[str]] = {
    api.CommandGetTopicsOfNamespace.PERSISTENT: PERSISTENT,
    api.CommandGetTopicsOfNamespace.NON_PERSISTENT: NON_PERSISTENT,
    api.CommandGetTopicsOfNamespace.ALL: PERSISTENT + NON_PERSISTENT,
}


def _request_id(command: api.BaseCommand) -> int:
    """The request id of any command that has one (for ERROR answers), else 0."""
    for descriptor, value in command.ListFields():
        if descriptor.name != "type" and hasattr(value, "request_id"):
            return int(value.request_id)
    return 0


def _listener_of(config: BrokerConfig, sockname: object) -> str | None:
    """The listener advertised at the local address a connection came in at (None: default)."""
    if not (isinstance(sockname, tuple) and len(sockname) >= 2):
        return None  # a Unix socket, or a transport that does not say
    return config.listener_at(str(sockname[0]), int(sockname[1]))
