"""The poll-based select kazoo's connection thread uses answers as select.select does; the
store's answers are handed to its loop by that thread; kazoo's wake-ups never block."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from magnetar.common.metadata import open_store
from magnetar.common.metadata.kazoo_poll import PollingHandler, Wakeups, poll_select
from magnetar.common.metadata.zookeeper import ZooKeeperStore
from magnetar.local.zookeeper import ZooKeeperServer


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


def test_wakeups_never_block_and_are_all_handed_back() -> None:
    """kazoo writes a wake-up for each request and reads one for each it sends: a channel that
    buffered them one byte each blocked its writer after a few hundred while none were read."""
    wakeups = Wakeups()
    sent = threading.Thread(target=lambda: [wakeups.send(b"\0") for _ in range(100_000)], daemon=True)
    sent.start()
    sent.join(20)
    assert not sent.is_alive(), "sending wake-ups with nobody reading them blocked"
    assert poll_select([wakeups], [], 0)[0] == [wakeups]
    received = sum(len(wakeups.recv(1)) for _ in range(100_000))
    assert received == 100_000
    assert poll_select([wakeups], [], 0)[0] == [], "readable with no wake-up owed"
    assert wakeups.recv(1) == b""  # kazoo's clean-up read of an empty channel does not block
    wakeups.send(b"\0")
    assert poll_select([wakeups], [], 0)[0] == [wakeups]
    wakeups.close()
    wakeups.close()


def test_requests_made_while_zookeeper_is_gone_do_not_block_and_are_answered_when_it_is_back(
    own_zookeeper: ZooKeeperServer,
) -> None:
    """Thousands of requests made while ZooKeeper is down (a broker of many topics): the thread
    making them is never held, and each is answered once ZooKeeper is back."""
    retry = KazooRetry(max_tries=-1, delay=0.1, max_delay=0.5)  # back as soon as ZooKeeper is
    client = KazooClient(
        hosts=own_zookeeper.address, timeout=30, handler=PollingHandler(), connection_retry=retry
    )
    client.start(timeout=30)
    try:
        client.ensure_path("/here")
        own_zookeeper.stop()
        deadline = time.monotonic() + 30
        while client.connected:
            assert time.monotonic() < deadline, "kazoo never saw ZooKeeper go"
            time.sleep(0.05)
        results: list[Any] = []
        asking = threading.Thread(
            target=lambda: results.extend(client.exists_async("/here") for _ in range(5_000)), daemon=True
        )
        asking.start()
        asking.join(20)
        blocked = asking.is_alive()
        # Back before judging: a caller held in kazoo's wake-up write is let go once kazoo
        # reconnects and reads its wake-ups again, so a failure ends instead of hanging the run.
        own_zookeeper.start()
        assert not blocked, "a request made while ZooKeeper was gone blocked its caller"
        for result in results:
            result.wait(60)
        assert all(result.ready() for result in results), "requests made while it was gone never answered"
    finally:
        client.stop()
        client.close()
