"""The frame decoder: whatever bytes arrive, it either returns a frame or raises FrameError."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.broker.protocol import commands
from magnetar.broker.protocol.frames import (
    ChecksumError,
    FrameError,
    encode,
    parse_frame,
    payload_section,
    read_metadata,
    verify_payload,
)
from magnetar.proto import PulsarApi_pb2 as api


def metadata(sequence: int = 1) -> api.MessageMetadata:
    return api.MessageMetadata(producer_name="p", sequence_id=sequence, publish_time=1)


def test_round_trip_of_a_payload_frame() -> None:
    send = commands.command(commands.T.SEND, "send", producer_id=1, sequence_id=7)
    section = payload_section(metadata(7), b"payload")
    frame = parse_frame(encode(send, section)[4:])
    assert frame.command.send.sequence_id == 7
    assert frame.headers_and_payload == section
    assert verify_payload(frame.headers_and_payload).sequence_id == 7


def test_a_flipped_payload_byte_fails_the_checksum() -> None:
    section = bytearray(payload_section(metadata(), b"payload"))
    section[-1] ^= 0x01
    with pytest.raises(ChecksumError):
        verify_payload(bytes(section))


def test_bad_magic_is_reported() -> None:
    section = b"\x0e\x02" + payload_section(metadata(), b"x")[2:]
    with pytest.raises(FrameError, match="magic"):
        verify_payload(section)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes_never_crash_the_decoder(body: bytes) -> None:
    try:
        frame = parse_frame(body)
    except FrameError:
        return
    if frame.headers_and_payload:
        with contextlib.suppress(FrameError):
            verify_payload(frame.headers_and_payload)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1), st.binary(max_size=64))
def test_command_sizes_past_the_frame_are_refused(size: int, rest: bytes) -> None:
    body = struct.pack(">I", size) + rest
    try:
        parse_frame(body)
    except FrameError:
        return
    assert 0 < size <= len(rest)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_payload_sections_are_refused_never_crash(data: st.DataObject) -> None:
    """A valid section, then bytes flipped, cut off or appended: either it still checks out (and
    its metadata reads back) or FrameError says why."""
    section = bytearray(payload_section(metadata(3), b"some payload bytes"))
    for _ in range(data.draw(st.integers(0, 4))):
        index = data.draw(st.integers(0, len(section) - 1))
        section[index] ^= data.draw(st.integers(1, 255))
    cut = data.draw(st.integers(0, len(section)))
    damaged = bytes(section[:cut]) + data.draw(st.binary(max_size=8))
    with contextlib.suppress(FrameError):
        verify_payload(damaged)
    with contextlib.suppress(FrameError):
        read_metadata(damaged)
