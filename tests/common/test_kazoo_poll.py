"""The poll-based select kazoo's connection thread uses answers as select.select does."""

from __future__ import annotations

import socket

import pytest

from magnetar.common.metadata.kazoo_poll import poll_select


def test_poll_select_answers_as_select_does() -> None:
    left, right = socket.socketpair()
    with left, right:
        assert poll_select([left], [], 0) == ([], [], [])  # nothing to read yet
        assert poll_select([left], [left], 0) == ([], [left], [])  # but room to write
        right.send(b"x")
        assert poll_select([left, right], [], 1.0) == ([left], [], [])
        right.close()
        left.recv(1)
        assert poll_select([left], [], 1.0) == ([left], [], [])  # end of stream reads as readable
        with pytest.raises(ValueError, match="non-negative"):
            poll_select([left], [], -1)


def test_a_closed_descriptor_is_an_error_not_a_hang() -> None:
    left, right = socket.socketpair()
    fd = left.detach()
    right.close()
    socket.close(fd)
    with pytest.raises(OSError, match="Bad file descriptor"):
        poll_select([fd], [], 1.0)
