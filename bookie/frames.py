"""Length-prefixed frames, the shape of BookKeeper's own protocol (v3): a 4-byte big-endian
length, then that many bytes of one protobuf message of ``proto/bookie.proto``.

The add path runs over these on a plain (or TLS) asyncio connection beside the gRPC service, as
BookKeeper's broker-to-bookie protocol runs over Netty: gRPC's streams cost more CPU per request
than everything else a bookie does with an entry. gRPC keeps the control calls (reads, fencing,
LAC, info).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

#: a frame's header: the length of what follows
HEADER = struct.Struct(">I")
#: the largest frame either side accepts (gRPC's message limit on the same port pair)
MAX_FRAME_BYTES = 64 * 1024 * 1024


class FrameError(ValueError):
    """Bytes that are not a frame this side can accept."""


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


def framed(payloads: Iterable[bytes]) -> bytes:
    """The frames of ``payloads``, back to back, in one buffer (for one write)."""
    parts: list[bytes] = []
    for payload in payloads:
        parts += (HEADER.pack(len(payload)), payload)
    return b"".join(parts)


class FrameReader:
    """Splits a byte stream into frames' payloads, whatever the chunks it arrives in."""

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max_bytes = max_bytes

    def feed(self, data: bytes) -> list[bytes]:
        """The payloads ``data`` completes, in order; raises FrameError for a length over the limit."""
        buffer = self._buffer
        buffer += data
        payloads: list[bytes] = []
        start, end = 0, len(buffer)
        while end - start >= HEADER.size:
            (length,) = HEADER.unpack_from(buffer, start)
            if length > self._max_bytes:
                raise FrameError(f"a frame of {length} bytes is over the limit of {self._max_bytes}")
            stop = start + HEADER.size + length
            if stop > end:
                break
            payloads.append(bytes(buffer[start + HEADER.size : stop]))
            start = stop
        if start:
            del buffer[:start]
        return payloads

    @property
    def pending(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buffer)
