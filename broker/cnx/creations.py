"""The producers and consumers a connection is still creating.

A PRODUCER or SUBSCRIBE may wait long: for its topic's load (the managed ledger's recovery, a new
ledger), a handover, an exclusive producer's turn. As in Pulsar's ServerCnx, which answers them
when their futures complete, they run beside the connection's other commands, so one client's
thousand producers on one connection load their topics side by side, not one after another.

What that asks of the commands that follow one on the same id, as Pulsar does:
- a second create of an id still being created is refused with ServiceNotReady (a client that
  timed out and retried; it retries again);
- a close of an id still being created waits for the creation to finish first, then closes what
  it made (the close is answered once, after).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from magnetar.common.background import BackgroundTasks

#: ("producer" or "consumer", its id on the connection)
CreationKey = tuple[str, int]


class Creations:
    def __init__(self) -> None:
        self._tasks = BackgroundTasks()
        self._pending: dict[CreationKey, asyncio.Task[None]] = {}

    def pending(self, key: CreationKey) -> bool:
        return key in self._pending

    def start(self, key: CreationKey, work: Coroutine[Any, Any, None]) -> None:
        task = self._tasks.spawn(work, name=f"create {key[0]} {key[1]}")
        self._pending[key] = task
        task.add_done_callback(lambda _: self._forget(key, task))

    def _forget(self, key: CreationKey, task: asyncio.Task[None]) -> None:
        if self._pending.get(key) is task:
            del self._pending[key]

    async def settled(self, key: CreationKey) -> None:
        """Return once the creation of ``key`` (if any) has finished, however it ended."""
        task = self._pending.get(key)
        if task is not None:
            await asyncio.wait({task})

    def __len__(self) -> int:
        return len(self._pending)
