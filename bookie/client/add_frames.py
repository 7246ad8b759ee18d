"""The client's end of a bookie's framed add port (``bookie/frames.py``): reads the
``AddResponse`` frames the bookie sends back and hands their results on; the requests are written
by ``BookieConnection``, which owns the connection."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from google.protobuf.message import DecodeError

from magnetar.bookie.frames import FrameError, FrameReader
from magnetar.proto import bookie_pb2 as pb


class AddFrames(asyncio.Protocol):
    """The client's end of a framed add connection: each ``AddResponse`` frame's results go to
    ``complete``; ``closed`` completes when the connection ends, ``why`` says how."""

    def __init__(self, complete: Callable[[pb.AddResult], None]) -> None:
        self._complete = complete
        self._reader = FrameReader()
        self._transport: asyncio.BaseTransport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.why = "bookie closed the add connection"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            for payload in self._reader.feed(data):
                response = pb.AddResponse.FromString(payload)
                if response.error:
                    self._end(f"bookie closed the add connection: {response.error}")
                    return
                for result in response.results:
                    self._complete(result)
        except (FrameError, DecodeError) as exc:
            self._end(f"unreadable answer on the add connection: {exc}")

    def _end(self, why: str) -> None:
        self.why = why
        if self._transport is not None:
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and self.why == "bookie closed the add connection":
            self.why = f"add connection lost: {exc}"
        if not self.closed.done():
            self.closed.set_result(None)
