"""A small asyncio Pulsar-protocol producer: how a replicator writes to a remote cluster.

It looks the topic up on the remote cluster's service URL (following Redirects), connects to
the owner, CONNECTs and creates a producer, then pipelines SENDs whose receipts come back in
order. It proves who it is as the broker's own client does (``credentials``: CONNECT carries
them, and an AUTH_CHALLENGE, the remote's token refresh, is answered with them again) and, given
a ``tls`` context, speaks ``pulsar+ssl://`` and follows lookups to the owners' TLS URLs. A
remote that refuses the credentials raises ``RemoteAuthenticationError`` saying so, never a
timeout. Anything that breaks the session (connection lost, SEND_ERROR, the remote closing the
producer on unload or transfer) fails every pending send with ``ProducerBrokenError``; the
replicator then reconnects and resends from its cursor, and the remote drops what it already
stored (see ``broker/replication/__init__.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import struct
from collections import deque
from collections.abc import Callable
from urllib.parse import urlparse

from magnetar.broker.protocol import commands
from magnetar.broker.protocol.commands import T
from magnetar.broker.protocol.frames import encode, parse_frame
from magnetar.common.authentication.client import ClientCredentials
from magnetar.proto import PulsarApi_pb2 as api

log = logging.getLogger(__name__)

_PROTOCOL_VERSION = 21
_MAX_REDIRECTS = 8
#: the request id of an ERROR that answers no request (Java's -1): a refused CONNECT, or a
#: connection closed because its credentials were refused
_NO_REQUEST = 2**64 - 1


def _retrieve(future: asyncio.Future[tuple[int, int]]) -> None:
    if not future.cancelled():
        future.exception()


class ProducerBrokenError(Exception):
    """The remote session is gone; pending sends are unconfirmed and must be sent again."""


class RemoteAuthenticationError(ProducerBrokenError):
    """The remote cluster refused the replicator's credentials (AuthenticationError)."""


class _Connection:
    """One TCP connection speaking the Pulsar protocol, with request/response matching."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._requests = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[api.BaseCommand]] = {}
        self.closed = asyncio.Event()

    @classmethod
    async def open(cls, service_url: str, timeout_s: float, tls: ssl.SSLContext | None) -> _Connection:
        """Connect to ``service_url``: pulsar+ssl:// with ``tls``, pulsar:// without."""
        url = urlparse(service_url)
        expected = "pulsar+ssl" if tls is not None else "pulsar"
        if url.scheme != expected or not url.hostname or not url.port:
            raise ProducerBrokenError(
                f"unsupported service URL {service_url!r}: expected {expected}://host:port"
            )
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                url.hostname,
                url.port,
                limit=1 << 20,
                ssl=tls,
                server_hostname=url.hostname if tls is not None else None,
            ),
            timeout_s,
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


def _refusal(url: str, error: api.CommandError) -> ProducerBrokenError:
    if error.error == api.ServerError.AuthenticationError:
        return RemoteAuthenticationError(f"{url} answered AuthenticationError: {error.message}")
    return ProducerBrokenError(f"{url} refused the connection: {error.message}")


class RemoteProducer:
    def __init__(
        self,
        service_url: str,
        topic: str,
        producer_name: str,
        *,
        timeout_s: float = 30,
        listener_name: str = "",
        credentials: Callable[[], ClientCredentials] = ClientCredentials,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``credentials``: gives what CONNECT and AUTH_RESPONSE carry, asked each time (as the
        official clients' token supplier: a renewed token file is read); the default is
        anonymous. ``tls``: the client context of ``pulsar+ssl://`` (then lookups are followed
        to TLS URLs)."""
        self.service_url = service_url
        self.credentials = credentials
        self.tls = tls
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
            owner = answer.brokerServiceUrlTls if self.tls is not None else answer.brokerServiceUrl
            if answer.response == kind.Connect and owner in (url, ""):
                await self._create_producer(connection, url)
                return
            connection.close()
            if not owner:  # on TLS, an owner without a TLS port (or listener) cannot be reached
                raise ProducerBrokenError(
                    f"lookup of {self.topic} at {url} named no {'TLS ' if self.tls else ''}URL of the owner"
                    + (f" under listener {self.listener_name!r}" if self.listener_name else "")
                )
            url = owner
        raise ProducerBrokenError(f"lookup of {self.topic} redirected more than {_MAX_REDIRECTS} times")

    async def _handshake(self, url: str) -> _Connection:
        try:
            credentials = self.credentials()
        except ValueError as exc:  # a token file gone or unreadable
            raise ProducerBrokenError(f"the replicator's credentials cannot be read: {exc}") from None
        connection = await _Connection.open(url, self.timeout_s, self.tls)
        reader = asyncio.get_running_loop().create_task(self._read_loop(connection))
        connect = commands.command(
            T.CONNECT, "connect", client_version="magnetar-replicator", protocol_version=_PROTOCOL_VERSION
        )
        if credentials.method:
            connect.connect.auth_method_name = credentials.method
            connect.connect.auth_data = credentials.data
        connection.send(connect)
        # CONNECTED has no request id: the read loop answers it as request 0.
        future: asyncio.Future[api.BaseCommand] = asyncio.get_running_loop().create_future()
        connection._waiting[0] = future
        try:
            answer = await asyncio.wait_for(future, self.timeout_s)
            if answer.type == T.ERROR:
                raise _refusal(url, answer.error)
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
        elif kind == T.AUTH_CHALLENGE:
            self._answer_challenge(connection)
        elif kind == T.SEND_RECEIPT:
            self._receipt(command.send_receipt)
        elif kind == T.SEND_ERROR:
            error = command.send_error
            self._break(ProducerBrokenError(f"remote refused sequence {error.sequence_id}: {error.message}"))
        elif kind == T.CLOSE_PRODUCER:
            self._break(ProducerBrokenError("the remote closed the producer (unload or transfer)"))
        elif kind == T.ERROR:
            self._error(connection, command)
        else:
            for field in ("lookupTopicResponse", "producer_success", "success"):
                if command.HasField(field):
                    connection.answer(getattr(command, field).request_id, command)

    def _answer_challenge(self, connection: _Connection) -> None:
        """The remote's refresh (its token expired): the credentials again, read afresh."""
        try:
            credentials = self.credentials()
        except ValueError as exc:  # the token file is gone: the remote closes the connection
            log.warning("replicator producer %s cannot answer AUTH_CHALLENGE: %s", self.producer_name, exc)
            return
        response = api.AuthData(auth_method_name=credentials.method, auth_data=credentials.data)
        connection.send(
            commands.command(
                T.AUTH_RESPONSE,
                "authResponse",
                client_version="magnetar-replicator",
                protocol_version=_PROTOCOL_VERSION,
                response=response,
            )
        )

    def _error(self, connection: _Connection, command: api.BaseCommand) -> None:
        error = command.error
        if connection.answer(error.request_id, command):
            return
        if error.request_id in (0, _NO_REQUEST) and connection.answer(0, command):
            return  # a fatal error before CONNECTED: the handshake reports it
        if error.error == api.ServerError.AuthenticationError and connection is self._connection:
            # the remote closes the connection after this: say why, not "connection lost"
            self._break(_refusal(self.connected_url, error))

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
