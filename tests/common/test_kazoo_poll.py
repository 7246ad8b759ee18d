"""The poll-based select kazoo's connection thread uses answers as select.select does; the
store's answers are handed to its loop by that thread."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from magnetar.common.metadata import open_store
from magnetar.common.metadata.kazoo_poll import poll_select
from magnetar.common.metadata.zookeeper import ZooKeeperStore


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


async def test_answers_do_not_wait_for_kazoos_callback_thread(zk_url: str) -> None:
    """kazoo runs result callbacks one at a time on a thread of their own: an answer that went
    through it waited behind whatever ran there (a slow watch handler), and cost every request a
    hop to a third thread."""
    store = await open_store(zk_url)
    assert isinstance(store, ZooKeeperStore)
    try:
        await store.put("/answered", b"x")
        released = threading.Event()
        store.client.handler.completion_queue.put(lambda: released.wait(60))  # a slow callback
        try:
            data, _ = await asyncio.wait_for(store.get("/answered"), 20)
            names = await asyncio.wait_for(store.children("/"), 20)
        finally:
            released.set()
        assert data == b"x"
        assert "answered" in names
    finally:
        await store.close()
