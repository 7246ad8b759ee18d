"""The bookie's registration in the metadata store, so ledger clients can pick it.

An ephemeral node ``/bookies/writable/<id>`` (or ``/bookies/readonly/<id>`` while read-only)
holds a JSON ``BookieRegistration``. It moves when the bookie turns read-only or writable again,
and is created again after the store session expires (ephemerals die with their session).

A node with our id and our exact registration left over from a previous incarnation (killed,
its session not yet timed out) is replaced at once: that incarnation cannot be alive, since we
hold its port. A node with our id but another address is a configuration error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from magnetar.bookie.layout import READONLY_BOOKIES, WRITABLE_BOOKIES, BookieRegistration
from magnetar.common.metadata.store import (
    MetadataError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    SessionState,
)

log = logging.getLogger(__name__)

_RETRY_S = (0.1, 0.2, 0.5, 1.0, 2.0)


class RegistrationConflictError(Exception):
    pass


class Registration:
    def __init__(self, store: MetadataStore, registration: BookieRegistration, *, read_only: bool) -> None:
        self._store = store
        self._registration = registration
        self._read_only = read_only
        self._lock = asyncio.Lock()
        self._retry: asyncio.Task[None] | None = None
        self._reconnected = asyncio.Event()
        self._stopped = False

    def path(self, read_only: bool) -> str:
        base = READONLY_BOOKIES if read_only else WRITABLE_BOOKIES
        return f"{base}/{self._registration.bookie_id}"

    async def start(self) -> None:
        self._store.on_session_event(self._on_session)
        await self.register()

    async def register(self) -> None:
        """Create our node under the path for the current mode; remove the other one."""
        async with self._lock:
            read_only = self._read_only
            await self._create(self.path(read_only))
            with contextlib.suppress(NoNodeError):
                await self._store.delete(self.path(not read_only))
            log.info("registered bookie %s at %s", self._registration.bookie_id, self.path(read_only))

    async def _create(self, path: str) -> None:
        value = self._registration.encode()
        try:
            await self._store.create(path, value, ephemeral=True)
            return
        except NodeExistsError:
            pass
        try:
            existing, _ = await self._store.get(path)
        except NoNodeError:
            existing = None
        if existing is not None and not self._registration.same_bookie(BookieRegistration.decode(existing)):
            raise RegistrationConflictError(
                f"bookie id {self._registration.bookie_id} is already registered at {path} by "
                f"another bookie ({existing.decode(errors='replace')}); give this one another bookie_id"
            )
        # Ours, from this session (a retry) or from a dead incarnation: make it this session's.
        with contextlib.suppress(NoNodeError):
            await self._store.delete(path)
        await self._store.create(path, value, ephemeral=True)

    def set_read_only(self, read_only: bool) -> None:
        """Listener for Bookie.on_read_only_change: move the node (in the background)."""
        self._read_only = read_only
        self._register_soon()

    def _on_session(self, state: SessionState) -> None:
        if state in (SessionState.EXPIRED, SessionState.CONNECTED) and not self._stopped:
            # After expiry our ephemeral is gone; on reconnect make sure it is there again, at
            # once: a retry waiting out its delay is woken (clients cannot place new ledgers
            # until enough bookies are registered).
            if state is SessionState.CONNECTED:
                self._reconnected.set()
            self._register_soon()

    def _register_soon(self) -> None:
        if self._stopped or (self._retry is not None and not self._retry.done()):
            return
        self._retry = asyncio.get_running_loop().create_task(self._register_until_done())

    async def _register_until_done(self) -> None:
        attempt = 0
        while not self._stopped:
            self._reconnected.clear()
            try:
                await self.register()
                return
            except MetadataError as exc:
                delay = _RETRY_S[min(attempt, len(_RETRY_S) - 1)]
                log.warning("registration failed (%s); retrying in %.1fs", exc, delay)
                attempt += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._reconnected.wait(), delay)

    async def stop(self) -> None:
        """Unregister at once, so clients stop choosing this bookie before it goes away."""
        self._stopped = True
        if self._retry is not None:
            self._retry.cancel()
        for read_only in (False, True):
            with contextlib.suppress(MetadataError):
                await self._store.delete(self.path(read_only))
