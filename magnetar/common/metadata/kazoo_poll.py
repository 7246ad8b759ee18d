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
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import select
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
