"""The bookie's framed add port: ``AddRequest`` frames in, ``AddResponse`` frames out, in the
order the requests came (``frames.py``; BookKeeper's v3 shape over a plain asyncio connection).

A request is handed to ``Bookie.add`` as soon as its frame is whole, so group commit sees every
connection's entries; its answer goes out once the journal has made its entries durable, after
the answers of every request before it on the connection. Answers ready in one loop turn leave
in one write. A frame that cannot be read gets an ``AddResponse`` whose ``error`` says why, and
the connection is closed: a client that sent it cannot know where the next frame starts.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import deque
from typing import NamedTuple, cast

from google.protobuf.message import DecodeError

from magnetar.bookie.bookie import Bookie, journal_failed
from magnetar.bookie.frames import FrameError, FrameReader, frame, framed
from magnetar.bookie.journal import JournalError
from magnetar.common.tls import CertificateReloader
from magnetar.proto import bookie_pb2 as pb

log = logging.getLogger(__name__)

#: requests unanswered on one connection at which it stops reading (and resumes below the low mark)
_HIGH_WATER = 1024
_LOW_WATER = 256


class _Pending(NamedTuple):
    received: float
    durable: asyncio.Future[None] | None
    response: pb.AddResponse


class _AddConnection(asyncio.Protocol):
    def __init__(self, bookie: Bookie, connections: set[_AddConnection]) -> None:
        self._bookie = bookie
        self._connections = connections
        self._reader = FrameReader()
        self._pending: deque[_Pending] = deque()
        self._transport: asyncio.Transport | None = None
        self._paused = False
        self.drained = asyncio.Event()
        self.drained.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike
        self._transport = cast(asyncio.Transport, transport)
        self._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        # Adds already taken are journaled all the same; their answers have nowhere to go.
        self._transport = None
        self._connections.discard(self)
        self.drained.set()

    def data_received(self, data: bytes) -> None:
        try:
            payloads = self._reader.feed(data)
        except FrameError as exc:
            self._refuse(str(exc))
            return
        for payload in payloads:
            try:
                request = pb.AddRequest.FromString(payload)
            except DecodeError as exc:
                self._refuse(f"cannot decode AddRequest ({len(payload)} bytes): {exc}")
                return
            self._start(request)
        self._answer_ready()
        if len(self._pending) >= _HIGH_WATER and self._transport is not None and not self._paused:
            self._paused = True
            self._transport.pause_reading()

    def _start(self, request: pb.AddRequest) -> None:
        self._bookie.stats.add_requests["framed"] += 1
        durable, response = self._bookie.add(request)
        self._pending.append(_Pending(time.perf_counter(), durable, response))
        self.drained.clear()
        if durable is not None:
            durable.add_done_callback(self._durable)

    def _durable(self, _: asyncio.Future[None]) -> None:
        self._answer_ready()

    def _answer_ready(self) -> None:
        """Send, in one write, the answers at the head of the line whose entries are durable."""
        answers: list[bytes] = []
        latency = self._bookie.stats.add_request_latency
        pending = self._pending
        while pending and (pending[0].durable is None or pending[0].durable.done()):
            received, durable, response = pending.popleft()
            if durable is not None and (error := _failure(durable)) is not None:
                response = journal_failed(response, error)
            latency.since(received)
            answers.append(response.SerializeToString())
        if not pending:
            self.drained.set()
        if answers and self._transport is not None:
            self._transport.write(framed(answers))
        if self._paused and len(pending) < _LOW_WATER and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    def _refuse(self, error: str) -> None:
        peer = self._transport.get_extra_info("peername") if self._transport else None
        log.warning("add port: closing the connection from %s: %s", peer, error)
        if self._transport is not None:
            self._transport.write(frame(pb.AddResponse(error=error).SerializeToString()))
            self._transport.close()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


def _failure(durable: asyncio.Future[None]) -> str | None:
    """Why the entries behind ``durable`` are not durable (None: they are)."""
    if durable.cancelled():
        return "the add was cancelled (the bookie is stopping)"
    error = durable.exception()
    if error is None:
        return None
    if not isinstance(error, JournalError):
        log.error("add failed on the add port: %r", error)
    return str(error)


class AddPort:
    """The listening socket and its connections; ``start`` binds, ``stop`` lets answers drain."""

    def __init__(self, bookie: Bookie) -> None:
        self._bookie = bookie
        self._server: asyncio.Server | None = None
        self._connections: set[_AddConnection] = set()
        self.port = 0

    async def start(
        self, host: str, port: int, tls: ssl.SSLContext | None, renewals: CertificateReloader | None = None
    ) -> int:
        """Bind and serve; with ``renewals``, a certificate renewed in place is loaded before the
        next connection's handshake (as the gRPC port serves it from its next handshake on)."""
        loop = asyncio.get_running_loop()

        def accepted() -> _AddConnection:
            if renewals is not None:
                renewals.check()
            return _AddConnection(self._bookie, self._connections)

        self._server = await loop.create_server(accepted, host, port, ssl=tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self, grace_s: float) -> None:
        """Stop accepting, give the answers still owed up to ``grace_s``, close the connections."""
        if self._server is None:
            return
        self._server.close()
        owed = [asyncio.ensure_future(connection.drained.wait()) for connection in self._connections]
        if owed:
            _, late = await asyncio.wait(owed, timeout=grace_s)
            for wait in late:
                wait.cancel()
        for connection in list(self._connections):
            connection.close()
        await self._server.wait_closed()
