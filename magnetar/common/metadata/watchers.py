"""Watch and session-listener bookkeeping shared by the backends.

Backends learn of changes on their own threads (kazoo's, or another event loop's); ``dispatch``
hands each event to the loop that opened the store, where callbacks run and coroutine callbacks
become tasks that are kept alive until they finish.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from magnetar.common.metadata.store import (
    EventType,
    SessionCallback,
    SessionState,
    WatchCallback,
    WatchEvent,
)

log = logging.getLogger(__name__)


class Watchers:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._data: dict[str, list[WatchCallback]] = {}
        self._children: dict[str, list[WatchCallback]] = {}
        self._session: list[SessionCallback] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    def add(self, path: str, callback: WatchCallback, *, children: bool) -> bool:
        """Register; True when this is the first callback on that (path, kind)."""
        table = self._children if children else self._data
        with self._lock:
            callbacks = table.setdefault(path, [])
            callbacks.append(callback)
            return len(callbacks) == 1

    def remove(self, path: str, callback: WatchCallback) -> None:
        with self._lock:
            for table in (self._data, self._children):
                callbacks = table.get(path, [])
                if callback in callbacks:
                    callbacks.remove(callback)
                if not callbacks:
                    table.pop(path, None)

    def watching(self, path: str, *, children: bool) -> bool:
        with self._lock:
            return bool((self._children if children else self._data).get(path))

    def dispatch(self, event: WatchEvent) -> None:
        """Deliver ``event`` to its callbacks on the store's loop (callable from any thread)."""
        table = self._children if event.type is EventType.CHILDREN else self._data
        with self._lock:
            callbacks = list(table.get(event.path, ()))
        for callback in callbacks:
            self._call_soon(callback, event)

    def add_session_listener(self, callback: SessionCallback) -> None:
        with self._lock:
            self._session.append(callback)

    def session_changed(self, state: SessionState) -> None:
        with self._lock:
            callbacks = list(self._session)
        for callback in callbacks:
            self._call_soon(callback, state)

    async def drain(self) -> None:
        """Wait for callbacks already scheduled (used on close, so none runs after it)."""
        await asyncio.sleep(0)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _call_soon(self, callback: Callable[[Any], Awaitable[None] | None], arg: Any) -> None:
        if self._loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        try:
            if running is self._loop:
                self._loop.call_soon(self._run, callback, arg)
            else:
                self._loop.call_soon_threadsafe(self._run, callback, arg)
        except RuntimeError:  # the loop closed meanwhile: nobody is left to tell
            pass

    def _run(self, callback: Callable[[Any], Awaitable[None] | None], arg: Any) -> None:
        try:
            result = callback(arg)
        except Exception:
            log.exception("metadata watch callback %r failed", callback)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("metadata watch callback failed", exc_info=task.exception())
