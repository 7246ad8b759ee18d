"""Producer access modes and the topic epoch, on their own (the end-to-end proof with the official
client is tests/broker/e2e/test_producer_access_modes.py)."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.producer_access import (
    EPOCH_PROPERTY,
    Mode,
    ProducerAccess,
    ProducerBusyError,
    ProducerFencedError,
    ProducerWithdrawnError,
)


class Store:
    def __init__(self, epoch: int | None = None) -> None:
        self.properties: dict[str, str] = {} if epoch is None else {EPOCH_PROPERTY: str(epoch)}

    async def set_property(self, key: str, value: str) -> None:
        self.properties[key] = value


class Contender:
    def __init__(self, name: str, topic: list[Contender], access: ProducerAccess) -> None:
        self.name = name
        self.fenced = False
        self._topic = topic
        self._access = access

    def fence_out(self) -> None:
        self.fenced = True
        self.leave()

    def leave(self) -> None:
        self._topic.remove(self)
        self._access.removed(self, self._topic)


class Topic:
    def __init__(self, epoch: int | None = None) -> None:
        self.store = Store(epoch)
        self.access = ProducerAccess(self.store)
        self.producers: list[Contender] = []
        self.queued: list[str] = []

    async def add(
        self, name: str | Contender, mode: int, epoch: int | None = None
    ) -> tuple[Contender, int | None]:
        producer = name if isinstance(name, Contender) else Contender(name, self.producers, self.access)
        granted = await self.access.admit(
            producer, mode, epoch, list(self.producers), lambda: self.queued.append(producer.name)
        )
        self.producers.append(producer)
        return producer, granted


async def test_exclusive_producers_get_rising_epochs_kept_in_the_store() -> None:
    topic = Topic()
    first, epoch = await topic.add("a", Mode.Exclusive)
    assert epoch == 0
    assert topic.store.properties[EPOCH_PROPERTY] == "0"
    with pytest.raises(ProducerFencedError, match="existing exclusive producer: a"):
        await topic.add("b", Mode.Exclusive)
    with pytest.raises(ProducerBusyError, match="existing exclusive producer: a"):
        await topic.add("c", Mode.Shared)
    first.leave()
    _, epoch = await topic.add("b", Mode.Exclusive)
    assert epoch == 1
    assert ProducerAccess(topic.store).epoch == 1  # a broker loading the topic later


async def test_exclusive_is_refused_beside_shared_producers() -> None:
    topic = Topic()
    _, epoch = await topic.add("s", Mode.Shared)
    assert epoch is None
    with pytest.raises(ProducerFencedError, match="existing shared producers"):
        await topic.add("x", Mode.Exclusive)


async def test_a_producer_reconnecting_with_an_old_epoch_is_fenced_and_the_current_one_is_not() -> None:
    topic = Topic(epoch=5)
    with pytest.raises(ProducerFencedError, match="Current epoch: 5, Producer epoch: 4"):
        await topic.add("old", Mode.Exclusive, epoch=4)
    _, epoch = await topic.add("current", Mode.Exclusive, epoch=5)
    assert epoch == 5


async def test_fencing_closes_the_holder_and_those_waiting() -> None:
    topic = Topic()
    holder, _ = await topic.add("holder", Mode.Exclusive)
    waiter = asyncio.ensure_future(topic.add("waiter", Mode.WaitForExclusive))
    await asyncio.sleep(0)
    assert topic.queued == ["waiter"]
    fencer, epoch = await topic.add("fencer", Mode.ExclusiveWithFencing)
    assert holder.fenced
    assert epoch == 1
    with pytest.raises(ProducerFencedError, match="Fenced out"):
        await waiter
    assert topic.producers == [fencer]


async def test_waiting_producers_take_turns_in_order_once_every_producer_left() -> None:
    topic = Topic()
    shared, _ = await topic.add("shared", Mode.Shared)
    first = asyncio.ensure_future(topic.add("first", Mode.WaitForExclusive))
    second = asyncio.ensure_future(topic.add("second", Mode.WaitForExclusive))
    await asyncio.sleep(0)
    assert topic.queued == ["first", "second"]
    with pytest.raises(ProducerBusyError):  # nobody new jumps the queue
        await topic.add("late", Mode.Shared)
    shared.leave()
    holder, epoch = await first
    assert epoch == 0
    assert not second.done()
    holder.leave()
    _, epoch = await second
    assert epoch == 1


async def test_a_waiting_producer_that_closes_leaves_the_queue() -> None:
    topic = Topic()
    holder, _ = await topic.add("holder", Mode.Exclusive)
    gone = Contender("gone", topic.producers, topic.access)
    waiting = asyncio.ensure_future(topic.add(gone, Mode.WaitForExclusive))
    await asyncio.sleep(0)
    topic.access.withdraw(gone)
    with pytest.raises(ProducerWithdrawnError):
        await waiting
    holder.leave()
    assert topic.access.exclusive is None
    _, epoch = await topic.add("next", Mode.Exclusive)
    assert epoch == 1
