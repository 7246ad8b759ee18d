"""A small asyncio Pulsar-protocol producer: how a replicator writes to a remote cluster.

It looks the topic up on the remote cluster's service URL (following Redirects), connects to
the owner, CONNECTs and creates a producer, then pipelines SENDs whose receipts come back in
order. Anything that breaks the session (connection lost, SEND_ERROR, the remote closing the
producer on unload or transfer) fails every pending send with ``ProducerBrokenError``; the
replicator then reconnects and resends from its cursor, and the remote drops what it already
stored (see ``broker/replication/__init__.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
from collections import deque
from urllib.parse import urlparse

from magnetar.broker.protocol import commands
from magnetar.broker.protocol.commands import T
from magnetar.broker.protocol.frames import encode, parse_frame
from magnetar.proto import PulsarApi_pb2 as api

log = logging.getLogger(__name__)

_PROTOCOL_VERSION = 21
_MAX_REDIRECTS = 8


def _retrieve(future: asyncio.Future[tuple[int, int]]) -> None:
    if not future.cancelled():
        future.exception()


class ProducerBrokenError(Exception):
    """The remote session is gone; pending sends are unconfirmed and must be sent again."""


class _Connection:
    """One TCP connection speaking the Pulsar protocol, with request/response matching."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._requests = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[api.BaseCommand]] = {}
        self.closed = asyncio.Event()

    @classmethod
    async def open(cls, service_url: str, timeout_s: float) -> _Connection:
        url = urlparse(service_url)
        if url.scheme != "pulsar" or not url.hostname or not url.port:
            raise ProducerBrokenError(f"unsupported service URL {service_url!r}: expected pulsar://host:port")
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(url.hostname, url.port, limit=1 << 20), timeout_s
        )
        return cls(reader, writer)

    def next_request_id(self) -> int:
        return next(self._requests)

    def send(self, command: api.BaseCommand, headers_and_payload: bytes = b"") -> None:
        if self.closed.is_set() or self.writer.is_closing():
            raise ProducerBrokenError("connection closed")
        self.writer.write(encode(command, headers_and_payload))

    async def request(self, command: api.BaseCommand, request_id: int, timeout_s: float) -> api.BaseCommand:
        future = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            self.send(command)
            return await asyncio.wait_for(future, timeout_s)
        finally:
            self._waiting.pop(request_id, None)

    def answer(self, request_id: int, command: api.BaseCommand) -> bool:
        future = self._waiting.get(request_id)
        if future is None or future.done():
            return False
        future.set_result(command)
        return True

    async def read(self) -> api.BaseCommand:
        (total,) = struct.unpack(">I", await self.reader.readexactly(4))
        return parse_frame(await self.reader.readexactly(total)).command

    def close(self) -> None:
        self.closed.set()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ProducerBrokenError("connection closed"))
        with contextlib.suppress(Exception):
            self.writer.close()


class RemoteProducer:
    def __init__(
        self,
        service_url: str,
        topic: str,
        producer_name: str,
        *,
        timeout_s: float = 30,
        listener_name: str = "",
    ) -> None:
        self.service_url = service_url
        #: the remote cluster's listenerName: lookups ask for the owner's address under it
        self.listener_name = listener_name
        self.topic = topic
        self.producer_name = producer_name
        self.timeout_s = timeout_s
        self.connected_url = ""
        self._connection: _Connection | None = None
        self._reader: asyncio.Task[None] | None = None
        #: (sequence id, future) of sends awaiting their receipt, in send order
        self._pending: deque[tuple[int, asyncio.Future[tuple[int, int]]]] = deque()
        self._producer_id = 1
        self._broken: Exception | None = None

    # -- session --------------------------------------------------------------------------------
    async def connect(self) -> None:
        """Look the topic up, connect to its owner and create the producer."""
        url = self.service_url
        for _ in range(_MAX_REDIRECTS):
            connection = await self._handshake(url)
            request_id = connection.next_request_id()
            lookup = commands.command(T.LOOKUP, "lookupTopic", topic=self.topic, request_id=request_id)
            if self.listener_name:
                lookup.lookupTopic.advertised_listener_name = self.listener_name
            try:
                answer = (await connection.request(lookup, request_id, self.timeout_s)).lookupTopicResponse
            except BaseException:
                connection.close()
                raise
            kind = api.CommandLookupTopicResponse
            if answer.response == kind.Failed:
                connection.close()
                raise ProducerBrokenError(f"lookup of {self.topic} at {url} failed: {answer.message}")
            if answer.response == kind.Connect and answer.brokerServiceUrl in (url, ""):
                await self._create_producer(connection, url)
                return
            connection.close()
            url = answer.brokerServiceUrl
        raise ProducerBrokenError(f"lookup of {self.topic} redirected more than {_MAX_REDIRECTS} times")

    async def _handshake(self, url: str) -> _Connection:
        connection = await _Connection.open(url, self.timeout_s)
        reader = asyncio.get_running_loop().create_task(self._read_loop(connection))
        connect = commands.command(
            T.CONNECT, "connect", client_version="magnetar-replicator", protocol_version=_PROTOCOL_VERSION
        )
        connection.send(connect)
        # CONNECTED has no request id: the read loop answers it as request 0.
        future: asyncio.Future[api.BaseCommand] = asyncio.get_running_loop().create_future()
        connection._waiting[0] = future
        try:
            await asyncio.wait_for(future, self.timeout_s)
        except BaseException:
            reader.cancel()
            connection.close()
            raise
        finally:
            connection._waiting.pop(0, None)
        if self._reader is not None:
            self._reader.cancel()
        self._reader = reader
        return connection

    async def _create_producer(self, connection: _Connection, url: str) -> None:
        request_id = connection.next_request_id()
        create = commands.command(
            T.PRODUCER,
            "producer",
            topic=self.topic,
            producer_id=self._producer_id,
            request_id=request_id,
            producer_name=self.producer_name,
        )
        try:
            answer = await connection.request(create, request_id, self.timeout_s)
        except BaseException:
            connection.close()
            raise
        if answer.type != T.PRODUCER_SUCCESS:
            connection.close()
            raise ProducerBrokenError(f"remote refused the producer on {self.topic}: {answer.error.message}")
        self._connection = connection
        self.connected_url = url

    @property
    def connected(self) -> bool:
        return self._connection is not None and self._broken is None

    async def _read_loop(self, connection: _Connection) -> None:
        try:
            while True:
                command = await connection.read()
                self._handle(connection, command)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            if connection is self._connection:  # lookup connections closed on purpose do not count
                self._break(ProducerBrokenError(f"connection to {self.topic}'s owner lost: {exc!r}"))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if connection is self._connection:
                self._break(ProducerBrokenError(f"bad answer from the remote: {exc!r}"))
        finally:
            connection.close()

    def _handle(self, connection: _Connection, command: api.BaseCommand) -> None:
        kind = command.type
        if kind == T.CONNECTED:
            connection.answer(0, command)
        elif kind == T.PING:
            connection.send(commands.pong())
        elif kind == T.SEND_RECEIPT:
            self._receipt(command.send_receipt)
        elif kind == T.SEND_ERROR:
            error = command.send_error
            self._break(ProducerBrokenError(f"remote refused sequence {error.sequence_id}: {error.message}"))
        elif kind == T.CLOSE_PRODUCER:
            self._break(ProducerBrokenError("the remote closed the producer (unload or transfer)"))
        elif kind == T.ERROR and not connection.answer(command.error.request_id, command):
            if command.error.request_id == 0:  # a fatal error before CONNECTED
                connection.answer(0, command)
        else:
            for field in ("lookupTopicResponse", "producer_success", "success"):
                if command.HasField(field):
                    connection.answer(getattr(command, field).request_id, command)

    def _receipt(self, receipt: api.CommandSendReceipt) -> None:
        if not self._pending:
            return
        sequence_id, future = self._pending[0]
        if receipt.sequence_id != sequence_id:
            self._break(ProducerBrokenError(f"receipt for {receipt.sequence_id}, expected {sequence_id}"))
            return
        self._pending.popleft()
        if not future.done():
            message_id = receipt.message_id
            future.set_result((commands.signed(message_id.ledgerId), commands.signed(message_id.entryId)))

    def _break(self, error: Exception) -> None:
        if self._broken is None:
            self._broken = error
            log.info("replicator producer %s on %s: %s", self.producer_name, self.topic, error)
        while self._pending:
            _, future = self._pending.popleft()
            if not future.done():
                future.set_exception(error)
        if self._connection is not None:
            self._connection.close()

    # -- sending --------------------------------------------------------------------------------
    def send(
        self,
        sequence_id: int,
        headers_and_payload: bytes,
        *,
        num_messages: int = 1,
        highest_sequence_id: int = 0,
    ) -> asyncio.Future[tuple[int, int]]:
        """Send one entry; the future gives the remote (ledger, entry) id, (-1, -1) for a duplicate."""
        future: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        # A broken session fails every pending send; the replicator learns it from the first
        # one, so the others' errors are taken here (no "exception never retrieved" noise).
        future.add_done_callback(_retrieve)
        if self._broken is not None or self._connection is None:
            future.set_exception(self._broken or ProducerBrokenError("not connected"))
            return future
        send = commands.command(
            T.SEND,
            "send",
            producer_id=self._producer_id,
            sequence_id=sequence_id,
            num_messages=num_messages,
            highest_sequence_id=highest_sequence_id,
        )
        self._pending.append((sequence_id, future))
        try:
            self._connection.send(send, headers_and_payload)
        except ProducerBrokenError as exc:
            self._break(exc)
        return future

    async def drain(self) -> None:
        """Wait until the socket's buffer is flushed (back-pressure on a slow remote)."""
        if self._connection is not None and not self._connection.closed.is_set():
            with contextlib.suppress(ConnectionError):
                await self._connection.writer.drain()

    async def close(self) -> None:
        self._break(ProducerBrokenError("producer closed"))
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
