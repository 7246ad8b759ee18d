"""Readers waiting for the next entry (Pulsar's waiting cursors): each gets its own future, so
cancelling one disturbs no other; all resolve at the next add, and are cancelled at the close."""

from __future__ import annotations

import asyncio


class NewEntries:
    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []

    def wait(self, *, closed: bool) -> asyncio.Future[None]:
        if len(self._waiters) > 64:
            self._waiters = [w for w in self._waiters if not w.done()]
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if closed:
            waiter.cancel()
        else:
            self._waiters.append(waiter)
        return waiter

    def notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def cancel_all(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.cancel()
