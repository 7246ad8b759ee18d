"""Pulsar's framing (architecture §3).

    simple frame:  [total size u32][command size u32][BaseCommand]
    payload frame: [total size u32][command size u32][BaseCommand]
                   [magic 0x0e01 u16][CRC32C u32][metadata size u32][MessageMetadata][payload]

Everything after the command is kept as one opaque byte string, ``headers_and_payload``: it is
what the broker stores as the entry and later sends after a MESSAGE command, byte for byte.
The checksum covers metadata size, metadata and payload.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import google_crc32c
from google.protobuf.message import DecodeError

from magnetar.proto import PulsarApi_pb2 as api

MAGIC = 0x0E01
#: bytes a frame may add to the largest message (Pulsar's Commands.MESSAGE_SIZE_FRAME_PADDING)
FRAME_PADDING = 10 * 1024

_U32 = struct.Struct(">I")
_MAGIC_CRC = struct.Struct(">HI")


class FrameError(Exception):
    """A frame that cannot be read; ``fatal`` when the stream can no longer be trusted."""

    def __init__(self, message: str, *, fatal: bool = True) -> None:
        super().__init__(message)
        self.fatal = fatal


class ChecksumError(FrameError):
    def __init__(self, message: str) -> None:
        super().__init__(message, fatal=False)


@dataclass(slots=True)
class Frame:
    command: api.BaseCommand
    #: magic, checksum, metadata and payload, as received (empty for simple frames)
    headers_and_payload: bytes = b""


def parse_frame(body: bytes) -> Frame:
    """Decode one frame (without its leading total-size field)."""
    if len(body) < 4:
        raise FrameError(f"frame of {len(body)} bytes is too short for a command size")
    (command_size,) = _U32.unpack_from(body, 0)
    if command_size == 0 or command_size > len(body) - 4:
        raise FrameError(f"command size {command_size} does not fit in a frame of {len(body)} bytes")
    command = api.BaseCommand()
    try:
        command.ParseFromString(body[4 : 4 + command_size])
    except DecodeError as exc:
        raise FrameError(f"command is not a valid BaseCommand: {exc}") from exc
    return Frame(command, body[4 + command_size :])


def verify_payload(headers_and_payload: bytes) -> api.MessageMetadata:
    """Check magic and CRC32C of a payload section and return its MessageMetadata."""
    if len(headers_and_payload) < 10:
        raise FrameError("payload section too short for magic, checksum and metadata size", fatal=False)
    magic, checksum = _MAGIC_CRC.unpack_from(headers_and_payload, 0)
    if magic != MAGIC:
        raise FrameError(f"bad magic number {magic:#06x} (expected 0x0e01)", fatal=False)
    computed = int(google_crc32c.value(headers_and_payload[6:]))
    if computed != checksum:
        raise ChecksumError(f"checksum mismatch: frame says {checksum:#010x}, bytes give {computed:#010x}")
    return read_metadata(headers_and_payload)


def read_metadata(headers_and_payload: bytes) -> api.MessageMetadata:
    """The MessageMetadata of a stored entry (magic and checksum skipped, not verified)."""
    return split_entry(headers_and_payload)[0]


def split_entry(headers_and_payload: bytes) -> tuple[api.MessageMetadata, bytes]:
    """A stored entry's MessageMetadata and the payload after it (as the producer sent it:
    compressed, or a batch, as its metadata says)."""
    offset = 6 if len(headers_and_payload) >= 2 and headers_and_payload[:2] == b"\x0e\x01" else 0
    if len(headers_and_payload) < offset + 4:
        raise FrameError("payload section too short for a metadata size", fatal=False)
    (size,) = _U32.unpack_from(headers_and_payload, offset)
    start = offset + 4
    if size > len(headers_and_payload) - start:
        raise FrameError(f"metadata size {size} exceeds the payload section", fatal=False)
    metadata = api.MessageMetadata()
    try:
        metadata.ParseFromString(headers_and_payload[start : start + size])
    except DecodeError as exc:
        raise FrameError(f"message metadata is not valid: {exc}", fatal=False) from exc
    return metadata, headers_and_payload[start + size :]


def encode(command: api.BaseCommand, headers_and_payload: bytes = b"") -> bytes:
    data = command.SerializeToString()
    total = 4 + len(data) + len(headers_and_payload)
    return b"".join((_U32.pack(total), _U32.pack(len(data)), data, headers_and_payload))


def payload_section(metadata: api.MessageMetadata, payload: bytes) -> bytes:
    """magic, checksum, metadata size, metadata, payload: what a producer sends (used by tests
    and by the geo-replicator when it produces)."""
    meta = metadata.SerializeToString()
    checked = _U32.pack(len(meta)) + meta + payload
    return _MAGIC_CRC.pack(MAGIC, int(google_crc32c.value(checked))) + checked
