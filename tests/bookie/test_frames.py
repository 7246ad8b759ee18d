"""Length-prefixed frames split back into their payloads, whatever chunks the bytes arrive in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magnetar.bookie.frames import HEADER, FrameError, FrameReader, frame, framed


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=7000), max_size=30),
)
def test_any_chunking_gives_back_every_payload_in_order(payloads: list[bytes], cuts: list[int]) -> None:
    stream = framed(payloads)
    assert stream == b"".join(frame(p) for p in payloads)
    reader = FrameReader()
    got: list[bytes] = []
    start = 0
    for cut in sorted({c for c in cuts if c < len(stream)} | {len(stream)}):
        got += reader.feed(stream[start:cut])
        start = cut
    assert got == payloads
    assert reader.pending == 0


def test_a_partial_frame_waits_for_the_rest() -> None:
    reader = FrameReader()
    data = frame(b"hello")
    assert reader.feed(data[:6]) == []
    assert reader.pending == 6
    assert reader.feed(data[6:]) == [b"hello"]


def test_a_length_over_the_limit_is_refused_before_its_bytes_arrive() -> None:
    reader = FrameReader(max_bytes=1024)
    with pytest.raises(FrameError, match="1025 bytes is over the limit of 1024"):
        reader.feed(HEADER.pack(1025))
