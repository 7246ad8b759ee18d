"""The topics loaded on this broker (Pulsar's ``BrokerService.topics``), and the one way a topic leaves.

A topic is loaded on first use, once its bundle is served here (the ``Gate``:
broker/loadbalance/bundles.py). Every departure, whether an unload, a transfer, a session expiry,
the fenced-topic watchdog or the admin API's topic unload, goes through ``Topics.evict``, in one
order:

1. fence: new sends are refused (their clients resend them to the next owner);
2. drain: the sends taken get their receipts while their producers are still attached here;
3. close: subscriptions, deduplication snapshots and the managed ledger, so this broker cannot
   append once the next owner has opened the ledger;
4. evict: forgotten here and by the managed-ledger factory, so the next load reads afresh;
5. tell clients: CLOSE_PRODUCER / CLOSE_CONSUMER, with ``assignedBrokerServiceUrl`` when a
   destination is known, else they look the topic up again.

Telling clients before their sends have their receipts would make them resend what was stored:
stored twice without deduplication. A transfer whose destination holds the clients until it owns
the bundle may tell them right after the drain (``early``), before the close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from magnetar.broker.managed_ledger import TopicLedger
from magnetar.broker.namespace import Bundle, NamespacePolicies, topic_hash
from magnetar.broker.ownership import BrokerInfo, NotServedError
from magnetar.broker.topic import NON_PERSISTENT, PERSISTENT, Topic, TopicName
from magnetar.common.background import BackgroundTasks

log = logging.getLogger(__name__)


class Gate(Protocol):
    """Whether this broker serves a topic: the bundles' side of loading."""

    async def admit(self, name: TopicName) -> NamespacePolicies:
        """The namespace's policies when ``name``'s bundle is served here (waiting for a handover
        that brings it); NotServedError otherwise."""
        ...

    def serves(self, name: TopicName, policies: NamespacePolicies) -> bool: ...


class Opener(Protocol):
    """Opens a topic's managed ledger and the topic over it (writable or PIP-63 read-only)."""

    async def open(self, name: TopicName, policies: NamespacePolicies) -> Topic: ...


class Clients(Protocol):
    """The connections' side of an eviction: telling the topics' clients to go."""

    def close_clients(self, topics: set[str], assigned: BrokerInfo | None) -> None:
        """Tell the clients of ``topics`` to go: to ``assigned`` (each at the listener it came
        in by) when there is one, else to a lookup."""


class LedgerCache(Protocol):
    """The managed-ledger factory's cache of open ledgers."""

    def get(self, name: str) -> TopicLedger | None: ...

    def forget(self, name: str) -> None: ...

    async def list(self, prefix: str) -> list[str]: ...


#: called once a topic is loaded and registered (geo-replication starts its replicators)
LoadListener = Callable[[Topic], Awaitable[None]]


class Topics:
    def __init__(
        self,
        gate: Gate,
        opener: Opener,
        clients: Clients,
        ledgers: LedgerCache,
        *,
        close_timeout_s: float,
        max_concurrent_loads: int = 5000,
    ) -> None:
        self._gate = gate
        self._opener = opener
        self._clients = clients
        self._ledgers = ledgers
        #: bounds a close that an eviction left to the background
        self._close_timeout_s = close_timeout_s
        self._loaded: dict[str, Topic] = {}
        self._loading: dict[str, asyncio.Task[Topic]] = {}
        #: loads under way at once; the others wait for a slot
        self._load_slots = asyncio.Semaphore(max_concurrent_loads)
        self._listeners: list[LoadListener] = []
        self._background = BackgroundTasks()

    # -- reading ----------------------------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        """The loaded topic named ``name`` (its canonical ``persistent://…`` form), if any."""
        return self._loaded.get(name)

    def loaded(self) -> list[Topic]:
        return list(self._loaded.values())

    def items(self) -> list[tuple[str, Topic]]:
        return list(self._loaded.items())

    def __len__(self) -> int:
        return len(self._loaded)

    def in_bundle(self, namespace: str, bundle: Bundle) -> list[Topic]:
        return [
            t for t in self._loaded.values()
            if t.name.namespace_name == namespace and bundle.contains(topic_hash(str(t.name)))
        ]  # fmt: skip

    def on_loaded(self, listener: LoadListener) -> None:
        self._listeners.append(listener)

    async def topics_of_namespace(self, namespace: str, domains: Sequence[str] = PERSISTENT) -> list[str]:
        """Every topic of ``domains`` in ``namespace``: persistent ones stored, loaded here or
        not; non-persistent ones loaded here (nothing of them is stored)."""
        found = []
        for domain in domains:
            if domain in NON_PERSISTENT:
                found += [
                    str(t.name) for t in self._loaded.values()
                    if t.name.domain == domain and t.name.namespace_name == namespace
                ]  # fmt: skip
                continue
            names = await self._ledgers.list(f"{namespace}/{domain}")
            found += [f"{domain}://{namespace}/{n.rsplit('/', 1)[1]}" for n in names]
        return sorted(found)

    # -- loading ----------------------------------------------------------------------------------
    async def get_or_load(self, name: str) -> Topic:
        """The topic ``name`` (``persistent://tenant/ns/topic``), loaded or created on first use;
        NotServedError when its bundle is not served here."""
        topic_name = TopicName.parse(name)
        key = str(topic_name)
        if key in self._loaded:
            return self._loaded[key]
        policies = await self._gate.admit(topic_name)
        if key in self._loaded:  # loaded while a handover was awaited
            return self._loaded[key]
        task = self._loading.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(topic_name, policies))
            self._loading[key] = task
        try:
            topic = await asyncio.shield(task)
        finally:
            if task.done():
                self._loading.pop(key, None)
        if not self._gate.serves(topic_name, policies):
            # Unloaded while it was loading: it must not stay open beside the next owner's.
            if self._loaded.get(key) is topic:
                await self.evict([topic], timeout_s=0)
            raise NotServedError(f"{key} is no longer served by this broker")
        return topic

    async def _load(self, name: TopicName, policies: NamespacePolicies) -> Topic:
        async with self._load_slots:
            topic = await self._opener.open(name, policies)
        self._loaded[str(name)] = topic
        for listener in self._listeners:
            await listener(topic)
        return topic

    # -- the one way out --------------------------------------------------------------------------
    async def evict(
        self,
        topics: list[Topic],
        *,
        early: Callable[[bool], BrokerInfo | None] | None = None,
        after_close: Callable[[], Awaitable[BrokerInfo | None]] | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Fence, drain, close, evict and tell the clients of ``topics`` (the module's order).

        ``early(drained)``: where to send the clients as soon as the sends are drained, before
        the close (None: after). ``after_close``: work between the close and telling the clients
        (releasing ownership, handing over) that answers where they go (None: to a lookup).
        ``timeout_s``: how long to wait for fence and close; what is left then goes on in the
        background, bounded by the close timeout (the next owner recovers what it left open).
        """
        told = False

        async def seal() -> None:
            nonlocal told
            drained = await asyncio.gather(*(t.fence() for t in topics), return_exceptions=True)
            assigned = early(all(d is True for d in drained)) if early is not None else None
            if assigned is not None:
                self._forget(topics)
                self._clients.close_clients(_names(topics), assigned)
                told = True
            # Side by side: a handover lasts as long as the slowest close, not the sum.
            await asyncio.gather(*(t.close() for t in topics), return_exceptions=True)

        if timeout_s is None:
            await seal()
        else:
            sealing = self._background.spawn(self._bounded(seal(), topics))
            await asyncio.wait({sealing}, timeout=timeout_s)
            if not sealing.done():
                log.info(
                    "%d topics not sealed within %.1f s: closing in the background", len(topics), timeout_s
                )
        assigned = await after_close() if after_close is not None else None
        self._forget(topics)
        if not told:
            self._clients.close_clients(_names(topics), assigned)

    async def delete(self, topic: Topic) -> None:
        """Evict ``topic`` and delete its managed ledger for good: ledgers, cursors, metadata.

        Deleted before its clients are told to go, so none of them re-creates it from the old
        data when it looks the topic up again."""

        async def delete_ledger() -> None:
            await topic.ledger.delete()

        await self.evict([topic], after_close=delete_ledger)

    async def _bounded(self, seal: Awaitable[None], topics: list[Topic]) -> None:
        try:
            await asyncio.wait_for(seal, self._close_timeout_s)
        except Exception as exc:  # its next owner recovers what it left open
            log.info("%s not closed cleanly: %s", ", ".join(sorted(_names(topics))), exc)

    def _forget(self, topics: list[Topic]) -> None:
        for topic in topics:
            if self._loaded.get(str(topic.name)) is topic:
                del self._loaded[str(topic.name)]
            if self._ledgers.get(topic.ledger.name) is topic.ledger:
                self._ledgers.forget(topic.ledger.name)

    async def close(self) -> None:
        """At a broker's stop, after its bundles moved away: close whatever is still loaded."""
        for topic in list(self._loaded.values()):
            with contextlib.suppress(Exception):
                await topic.close()
        self._loaded.clear()
        await self._background.wait()


def _names(topics: list[Topic]) -> set[str]:
    return {str(t.name) for t in topics}
