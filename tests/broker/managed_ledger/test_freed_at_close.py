"""A topic that closes (unloaded, moved away) is freed at once by reference counting, with its
managed ledger, cursors, subscriptions and dispatchers: none of them waits for a full garbage
collection, which on a broker of many topics walks every topic's objects and stalls it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from magnetar.broker.managed_ledger import InitialPosition, ManagedLedgerConfig, ManagedLedgerFactory
from magnetar.broker.topic import Topic, TopicName
from magnetar.proto import PulsarApi_pb2 as api
from tests.broker.managed_ledger.conftest import Storage

log = logging.getLogger(__name__)


def _kept(refs: list[weakref.ref[Any]]) -> list[str]:
    """The objects still alive, each with what refers to it (to find the cycle)."""
    kept = []
    for ref in refs:
        obj = ref()
        if obj is not None:
            holders = sorted(
                {
                    f"frame of {h.f_code.co_name}" if type(h).__name__ == "frame" else type(h).__qualname__
                    for h in gc.get_referrers(obj)
                }
                - {"list", "frame of _kept"}
            )
            kept.append(f"{type(obj).__qualname__} (held by {', '.join(holders)})")
    return kept


def _hook_naming(topic: Topic) -> Callable[[], Awaitable[None]]:
    """A close hook that refers to its topic, as the replication manager's does."""

    async def stop_replication() -> None:
        log.debug("replication of %s stopping", topic.name)

    return stop_replication


async def test_a_closed_topic_is_freed_without_the_collector(storage: Storage) -> None:
    factory = ManagedLedgerFactory(storage.store, storage.client, ManagedLedgerConfig())
    name = TopicName.parse("persistent://t/ns/freed")
    ledger = await factory.open(name.managed_ledger_name)
    topic = await Topic.load(name, ledger, deduplication=False)
    exclusive = await topic.subscription(
        "exclusive", api.CommandSubscribe.Exclusive, InitialPosition.EARLIEST
    )
    shared = await topic.subscription("shared", api.CommandSubscribe.Shared, InitialPosition.EARLIEST)
    for i in range(3):
        position = await ledger.add_entry(b"%d" % i)
        await exclusive.cursor.mark_delete(position)
        await shared.cursor.delete([position])
    await exclusive.cursor.flush()

    topic.on_close.append(_hook_naming(topic))
    watched = (topic, ledger, exclusive, shared, exclusive.cursor, shared.cursor)
    refs: list[weakref.ref[Any]] = [weakref.ref(o) for o in watched]
    freed = asyncio.Event()
    left = len(watched)

    def one_freed() -> None:
        nonlocal left
        left -= 1
        if not left:
            freed.set()

    _ = [weakref.finalize(o, one_freed) for o in watched]
    del watched
    gc.collect()
    gc.disable()
    try:
        await topic.close()
        factory.forget(ledger.name)  # as the broker's registry does once the topic is closed
        del topic, ledger, exclusive, shared
        # What the close cancelled or left to finish (a cursor's flush being written) ends soon;
        # what only a cycle holds never goes, with the collector off.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(freed.wait(), 10)
        kept = _kept(refs)
    finally:
        gc.enable()
    assert not kept, f"kept alive by reference cycles only: {kept}"
    await factory.close()
