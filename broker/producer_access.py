"""Producer access modes (Pulsar's ``ProducerAccessMode``) and the topic epoch.

- Shared: any number of producers, unless one holds the topic exclusively (ProducerBusy).
- Exclusive: the only producer, or refused (ProducerFenced) when there is another.
- ExclusiveWithFencing: takes the topic; whoever held it is closed and can never come back.
- WaitForExclusive: queued (PRODUCER_SUCCESS with ``producer_ready`` false) until every other
  producer has gone, then it holds the topic.

Each time a producer takes the topic exclusively the topic's epoch goes up by one, kept with the
managed ledger so that it survives restarts and bundle moves. A client reconnecting gives the
epoch it was granted: one below the current epoch means another producer held the topic in
between, and the reconnecting producer is fenced (it would otherwise write after it lost the topic).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from magnetar.proto import PulsarApi_pb2 as api

#: the managed-ledger property holding the epoch (Pulsar's name)
EPOCH_PROPERTY = "pulsar.topic.epoch"

Mode = api.ProducerAccessMode


class ProducerAccessError(Exception):
    """A producer not admitted under its access mode."""


class ProducerBusyError(ProducerAccessError):
    """A Shared producer while one holds the topic exclusively."""


class ProducerFencedError(ProducerAccessError):
    """An exclusive producer refused because another holds the topic or held it since."""


class ProducerWithdrawnError(ProducerAccessError):
    """A producer waiting for exclusive access closed (or its connection did) before its turn."""


class EpochStore(Protocol):
    """Where the epoch is kept (the topic's managed ledger)."""

    @property
    def properties(self) -> dict[str, str]: ...

    async def set_property(self, key: str, value: str) -> None: ...


class Contender(Protocol):
    """A producer, as access control sees it."""

    @property
    def name(self) -> str: ...

    def fence_out(self) -> None:
        """Close it at the client's side too: it loses the topic for good."""
        ...


@dataclass(eq=False)
class _Waiting:
    producer: Contender
    epoch: int | None
    turn: asyncio.Future[None]


class ProducerAccess:
    def __init__(self, store: EpochStore) -> None:
        self._store = store
        stored = store.properties.get(EPOCH_PROPERTY)
        #: None until a producer first took the topic exclusively
        self.epoch: int | None = int(stored) if stored is not None else None
        #: the name of the producer holding the topic exclusively
        self.exclusive: str | None = None
        #: a list, not a deque: every topic has one and it is nearly always empty (56 bytes, not 760)
        self._waiting: list[_Waiting] = []

    async def admit(
        self,
        producer: Contender,
        mode: int,
        epoch: int | None,
        others: Collection[Contender],
        queued: Callable[[], None],
    ) -> int | None:
        """Admit ``producer`` (asking ``mode``, reconnecting at ``epoch`` if given) beside the
        topic's ``others``; the epoch to tell it. ``queued`` is called when it has to wait."""
        if mode == Mode.Shared:
            if self.exclusive is not None or self._waiting:
                raise ProducerBusyError(f"Topic has an existing exclusive producer: {self.exclusive}")
            return self.epoch
        if mode == Mode.Exclusive:
            if self.exclusive is not None or self._waiting:
                raise ProducerFencedError(f"Topic has an existing exclusive producer: {self.exclusive}")
            if others:
                raise ProducerFencedError("Topic has existing shared producers")
        elif mode == Mode.ExclusiveWithFencing:
            self._fence_out(others)
        elif mode == Mode.WaitForExclusive:
            if self.exclusive is not None or others:
                await self._wait_turn(producer, epoch, queued)
                return await self._take(producer, epoch, checked=False)
        else:
            raise ProducerFencedError(f"invalid producer access mode {mode}")
        return await self._take(producer, epoch, checked=True)

    def removed(self, producer: Contender, remaining: Collection[Contender]) -> None:
        """``producer`` left the topic: the exclusive hold ends with it, and the next waiting
        producer's turn comes once no producer remains (Shared ones too)."""
        if self.exclusive == producer.name:
            self.exclusive = None
        if not remaining:
            self._next_turn()

    def withdraw(self, producer: Contender) -> None:
        """``producer`` stops waiting (closed before its turn)."""
        for waiting in list(self._waiting):
            if waiting.producer is producer:
                self._waiting.remove(waiting)
                if not waiting.turn.done():
                    waiting.turn.set_exception(
                        ProducerWithdrawnError(f"{producer.name} closed while waiting")
                    )

    def withdraw_all(self, why: str) -> None:
        """The topic goes (unload, delete): nobody waits for it here any more."""
        waiting, self._waiting = self._waiting, []
        for entry in waiting:
            if not entry.turn.done():
                entry.turn.set_exception(ProducerWithdrawnError(why))

    def _fence_out(self, others: Collection[Contender]) -> None:
        waiting, self._waiting = self._waiting, []
        for entry in waiting:
            if not entry.turn.done():
                entry.turn.set_exception(ProducerFencedError("Fenced out"))
        for other in list(others):
            other.fence_out()  # each leaves the topic, which calls removed()
        self.exclusive = None

    async def _wait_turn(self, producer: Contender, epoch: int | None, queued: Callable[[], None]) -> None:
        waiting = _Waiting(producer, epoch, asyncio.get_running_loop().create_future())
        self._waiting.append(waiting)
        queued()
        await waiting.turn  # _next_turn made it the holder, or it was fenced or withdrawn

    def _next_turn(self) -> None:
        while self._waiting and self.exclusive is None:
            waiting = self._waiting.pop(0)
            if not waiting.turn.done():
                self.exclusive = waiting.producer.name
                waiting.turn.set_result(None)

    async def _take(self, producer: Contender, epoch: int | None, *, checked: bool) -> int:
        if checked and epoch is not None and self.epoch is not None and epoch < self.epoch:
            raise ProducerFencedError(
                f"Topic epoch has already moved. Current epoch: {self.epoch}, Producer epoch: {epoch}"
            )
        self.exclusive = producer.name
        new_epoch = epoch if epoch is not None else (-1 if self.epoch is None else self.epoch) + 1
        try:
            await self._store.set_property(EPOCH_PROPERTY, str(new_epoch))
        except BaseException:
            if self.exclusive == producer.name:
                self.exclusive = None
                self._next_turn()
            raise
        self.epoch = new_epoch
        return new_epoch
