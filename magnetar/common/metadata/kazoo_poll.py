"""kazoo's threading handler with a select that costs one poll(2) call.

kazoo's own ``select`` (``kazoo.handlers.utils.selector_select``) builds an epoll set, registers
the sockets, waits and closes the set on every call, and its connection thread calls it several
times for each request and each answer (before every read and write). On this project's 2-core
machine (busy with other work), concurrent reads cost 480 µs of the process's CPU each with it and
275 µs with this one; making and closing those sets was a quarter of a broker's samples while it
loaded a thousand topics. A poll set
is made in user space and waited on with one system call; like kazoo's, it has no limit on file
descriptor numbers (select(2) stops at 1024, which a busy broker passes).

Its results also run the callbacks marked ``Inline`` on the thread that settles them (kazoo's
connection thread) instead of handing each to kazoo's callback thread: the store's bridge only
passes the answer on to the asyncio loop, so each answer took three threads in turn (a queue
put, the callback thread woken, the GIL passed to it and back) where two do. A broker that
reloads a bundle of a thousand topics waits on some fifteen thousand answers.

And its wake-up channel never blocks the caller. kazoo wakes its connection thread for each
request by writing a byte to a socket pair, and reads one back for each request it sends; while
ZooKeeper cannot be reached it sends nothing and reads nothing, so the pair's buffer (a few
hundred one-byte writes on Linux) fills and the next request's write blocks, on the thread that
made the request: a broker of many topics whose ZooKeeper went away had its event loop stuck in
that write for good (it did not even see its SIGTERM). Here the wake-ups owed are counted, and
the socket holds one byte while any are.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import select
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.handlers.threading import AsyncResult, SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd

log = logging.getLogger(__name__)

_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR


class Inline:
    """A result callback that runs where the result is settled: it must be quick and never
    block (kazoo's connection thread runs it between reading two answers)."""

    __slots__ = ("_callback",)

    def __init__(self, callback: Callable[[Any], None]) -> None:
        self._callback = callback

    def __call__(self, result: Any) -> None:
        self._callback(result)


class _Result(AsyncResult):  # type: ignore[misc]
    def _do_callbacks(self) -> None:
        for callback in self._callbacks:
            if isinstance(callback, Inline) or not self._handler.running:
                try:
                    callback(self)
                except Exception:  # kazoo's connection thread must go on reading
                    log.exception("ZooKeeper result callback failed")
            else:
                self._handler.completion_queue.put(functools.partial(callback, self))


class PollingHandler(SequentialThreadingHandler):  # type: ignore[misc]
    def async_result(self) -> AsyncResult:
        return _Result(self)

    def create_socket_pair(self) -> tuple[Wakeups, Wakeups]:
        """kazoo's (read, write) wake-up pair: both ends are one counted channel."""
        wakeups = Wakeups()
        return wakeups, wakeups

    def select(
        self,
        rlist: Sequence[Any],
        wlist: Sequence[Any],
        xlist: Sequence[Any],
        timeout: float | None = None,
    ) -> tuple[list[Any], list[Any], list[Any]]:
        return poll_select(rlist, wlist, timeout)


def poll_select(
    rlist: Sequence[Any], wlist: Sequence[Any], timeout: float | None
) -> tuple[list[Any], list[Any], list[Any]]:
    """select.select's answer for the read and write lists (kazoo passes no exceptional list),
    through poll(2)."""
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be non-negative")
    masks: dict[int, int] = {}
    for fileobj in rlist:
        fd = fileobj_to_fd(fileobj)
        masks[fd] = masks.get(fd, 0) | select.POLLIN | select.POLLPRI
    for fileobj in wlist:
        fd = fileobj_to_fd(fileobj)
        masks[fd] = masks.get(fd, 0) | select.POLLOUT
    poller = select.poll()
    for fd, mask in masks.items():
        poller.register(fd, mask)
    ready = dict(poller.poll(None if timeout is None else timeout * 1000))
    if any(events & select.POLLNVAL for events in ready.values()):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))  # as select.select says it
    readable = [f for f in rlist if ready.get(fileobj_to_fd(f), 0) & _READABLE]
    writable = [f for f in wlist if ready.get(fileobj_to_fd(f), 0) & _WRITABLE]
    return readable, writable, []


class Wakeups:
    """A wake-up channel that counts what is owed instead of buffering a byte for each: ``send``
    never blocks, ``recv`` hands back what was counted, and the socket ``fileno`` names (what a
    select waits on) holds one byte exactly while some are owed."""

    def __init__(self) -> None:
        self._read_end, self._write_end = socket.socketpair()
        self._lock = threading.Lock()
        self._owed = 0
        self._closed = False

    def fileno(self) -> int:
        return self._read_end.fileno()

    def send(self, data: bytes) -> int:
        with self._lock:
            if self._closed:
                raise OSError(errno.EBADF, "the wake-up channel is closed")
            self._owed += len(data)
            if self._owed == len(data) and data:  # none were owed: make the channel readable
                self._write_end.send(b"\0")
        return len(data)

    def recv(self, size: int) -> bytes:
        with self._lock:
            taken = min(size, self._owed)
            self._owed -= taken
            if taken and not self._owed:
                self._read_end.recv(1)  # the one byte written when the first came
        return b"\0" * taken

    def close(self) -> None:
        """Both ends are closed (kazoo closes its read and its write end: the second is a no-op)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._read_end.close()
        self._write_end.close()
