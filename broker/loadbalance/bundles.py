"""The bundles this broker serves (Pulsar's NamespaceService): lookup, ownership, unload, transfer.

Lookups on any broker answer Connect (this broker owns the bundle, or just took it) or Redirect
(another broker owns it, or the least-loaded broker should take it). Bundles leave a broker by
unload (clients reconnect with backoff and look the topic up again) or by transfer (the
destination takes ownership first and clients are sent straight to it).

The handover of a transfer. Profiling a transfer of 16 busy topics (bench/bench_unload.py) showed
most of the window spent by the destination opening the managed ledgers, and most of that
creating each topic's next ledger (several metadata-store round trips per topic). The new ledger
does not depend on the old ones, so before fencing, the source asks the destination to *prepare*
the bundle's topics (broker/loadbalance/peers.py): it creates the ledgers
(ManagedLedgerFactory.prepare), and its open after the source has closed only records them. A
failed or slow prepare changes nothing but speed; an unused prepared ledger is deleted after a
minute.

A prepare also tells the destination to expect the topics (``BundleGate.expect_handover``): until
the handover ends (or ``HANDOVER_HOLD_S``) a PRODUCER or SUBSCRIBE for one of them waits there,
off the connection's read loop, instead of being refused. The source then sends its clients away
as soon as every send it took has its receipt, and closes, releases and hands over while they
reconnect. A destination that did not answer the prepare holds nothing, so then the clients are
told only once it owns the bundle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.loadbalance.peers import PeerClient
from magnetar.broker.namespace import Bundle, NamespaceError, NamespacePolicies, Namespaces, SplitCommit
from magnetar.broker.ownership import BrokerInfo, LookupUrls, NotServedError, Owner, Ownership, lookup_urls
from magnetar.broker.topic import Topic, TopicName
from magnetar.broker.topics import Topics
from magnetar.common.background import BackgroundTasks
from magnetar.common.metadata import MetadataError, SessionState

log = logging.getLogger(__name__)

#: how long a transfer's destination holds clients that came before it owns their bundle (the
#: source normally hands over within a fraction of a second; after this they are refused and look
#: the topic up again)
HANDOVER_HOLD_S = 10.0
#: a burst of ledger creations (metadata writes, each synced to disk by ZooKeeper) slows the
#: source's writes just before the handover when they share a host: a few at a time
PREPARE_CONCURRENCY = 2


class Placement(Protocol):
    """The load manager's choice of a broker for a bundle."""

    async def choose_broker(self, exclude: set[str] | None = None) -> str: ...


class LedgerPreparer(Protocol):
    """Creates a managed ledger's next ledger ahead of its open (ManagedLedgerFactory)."""

    async def prepare(self, name: str) -> None: ...


def _key(name: str) -> str:
    return str(TopicName.parse(name))


class BundleGate:
    """Whether a topic is served here (topics.Gate), including the topics a transfer brings."""

    def __init__(self, namespaces: Namespaces, ownership: Ownership) -> None:
        self._namespaces = namespaces
        self._ownership = ownership
        #: topics a transfer is bringing here: their clients wait for the handover to end
        self._incoming: dict[str, asyncio.Future[None]] = {}

    async def admit(self, name: TopicName) -> NamespacePolicies:
        # Read once: the bundle and the topic's settings come from the same policies.
        policies = await self._namespaces.policies(name.namespace_name)
        held = self._incoming.get(str(name))
        if held is not None and not self.serves(name, policies):
            await asyncio.shield(held)  # sent here by a transfer that is not over yet
        if not self.serves(name, policies):
            # Sent here by a lookup that saw this broker's node while it was still taking the
            # bundle (a concurrent lookup's acquisition): served once that ends.
            await self._ownership.acquired(name.namespace_name, policies.bundle_for(str(name)))
        if not self.serves(name, policies):
            bundle = policies.bundle_for(str(name))
            raise NotServedError(
                f"{name} (bundle {name.namespace_name}/{bundle.name}) is not served by this broker"
            )
        return policies

    def serves(self, name: TopicName, policies: NamespacePolicies) -> bool:
        return (name.namespace_name, policies.bundle_for(str(name))) in self._ownership.owned

    def incoming(self, name: TopicName) -> bool:
        return str(name) in self._incoming

    def expect_handover(self, topics: list[str]) -> None:
        """A transfer is bringing ``topics`` here: a PRODUCER or SUBSCRIBE for one of them that
        comes before this broker owns its bundle waits (at most ``HANDOVER_HOLD_S``) instead of
        being refused, so the source can send its clients here before the handover ends."""
        loop = asyncio.get_running_loop()
        for name in topics:
            key = _key(name)
            held = self._incoming.get(key)
            if held is None or held.done():
                held = self._incoming[key] = loop.create_future()
                loop.call_later(HANDOVER_HOLD_S, self.handover_ended, [key], held)

    def handover_ended(self, keys: list[str], only: asyncio.Future[None] | None = None) -> None:
        for key in keys:
            held = self._incoming.get(key)
            if held is not None and (only is None or held is only):
                del self._incoming[key]
                if not held.done():
                    held.set_result(None)


@dataclass
class LookupStats:
    """Lookups answered since start, binary and HTTP alike (Pulsar's ``pulsar_broker_lookup_*``):
    what shows whether clients looked a topic up again after a bundle moved."""

    answers: int = 0
    redirects: int = 0
    failures: int = 0


class Bundles:
    def __init__(
        self,
        gate: BundleGate,
        topics: Topics,
        ownership: Ownership,
        namespaces: Namespaces,
        placement: Placement,
        peers: PeerClient,
        ledgers: LedgerPreparer | None,
        *,
        session_timeout_s: float,
    ) -> None:
        self.gate = gate
        self._topics = topics
        self._ownership = ownership
        self._namespaces = namespaces
        self._placement = placement
        self._peers = peers
        self._ledgers = ledgers
        self._session_timeout_s = session_timeout_s
        #: bundles whose clients a transfer has sent to their destination, until it owns them
        self._outgoing: dict[tuple[str, Bundle], BrokerInfo] = {}
        #: lookups of a bundle nobody here owns, being worked out: (namespace, bundle, authoritative)
        self._resolving: dict[tuple[str, Bundle, bool], asyncio.Task[Owner | BrokerInfo]] = {}
        self._session_expired = False
        self._background = BackgroundTasks()
        self.lookup_stats = LookupStats()

    @property
    def broker_id(self) -> str:
        return self._ownership.me.broker_id

    def owns(self, namespace: str, bundle: Bundle) -> bool:
        return (namespace, bundle) in self._ownership.owned

    def owned(self) -> list[tuple[str, Bundle]]:
        return sorted(self._ownership.owned)

    async def owner(self, namespace: str, bundle: Bundle) -> Owner | None:
        return await self._ownership.owner(namespace, bundle)

    async def brokers(self) -> list[BrokerInfo]:
        return await self._ownership.brokers()

    async def bundle_of(self, topic: TopicName) -> tuple[str, Bundle]:
        policies = await self._namespaces.policies(topic.namespace_name)
        return topic.namespace_name, policies.bundle_for(str(topic))

    # -- lookup ---------------------------------------------------------------------------------
    async def lookup(
        self, topic: str, *, authoritative: bool = False, listener: str | None = None
    ) -> tuple[LookupUrls, bool]:
        """(service URLs, redirect?) for ``topic``: its owner, or a broker chosen to own it; the
        address of the ``listener`` when one is named (UnknownListenerError if not advertised)."""
        try:
            url, redirect = await self._lookup(topic, authoritative, listener)
        except Exception:
            self.lookup_stats.failures += 1
            raise
        self.lookup_stats.answers += 1
        self.lookup_stats.redirects += redirect
        return url, redirect

    async def _lookup(self, topic: str, authoritative: bool, listener: str | None) -> tuple[LookupUrls, bool]:
        name = TopicName.parse(topic)
        if self.gate.incoming(name):  # a transfer brings it here: its clients wait here
            return lookup_urls(self._ownership.owner_record, listener), False
        namespace, bundle = await self.bundle_of(name)
        outgoing = self._outgoing.get((namespace, bundle))
        if outgoing is not None:  # its clients were sent to the destination: so are lookups
            return lookup_urls(outgoing, listener), True
        if (namespace, bundle) in self._ownership.owned:
            # Served here (what the gate admits producers and consumers by): no store to ask.
            return lookup_urls(self._ownership.owner_record, listener), False
        owner = await self._resolve(namespace, bundle, authoritative)
        return lookup_urls(owner, listener), owner.broker_id != self.broker_id

    async def _resolve(self, namespace: str, bundle: Bundle, authoritative: bool) -> Owner | BrokerInfo:
        """The bundle's owner, or the broker chosen to own it: one answer for every lookup of the
        bundle that comes while it is worked out (the clients of a bundle that moved all look
        their topics up at once, and each would read and race for the same nodes)."""
        key = (namespace, bundle, authoritative)
        task = self._resolving.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                self._owner_or_chosen(namespace, bundle, authoritative)
            )
            self._resolving[key] = task
            task.add_done_callback(lambda done: self._resolved(key, done))
        return await asyncio.shield(task)

    def _resolved(self, key: tuple[str, Bundle, bool], task: asyncio.Task[Owner | BrokerInfo]) -> None:
        if self._resolving.get(key) is task:
            del self._resolving[key]
        if not task.cancelled():
            task.exception()  # every waiter had it; none left means nobody needs it

    async def _owner_or_chosen(
        self, namespace: str, bundle: Bundle, authoritative: bool
    ) -> Owner | BrokerInfo:
        owner = await self._ownership.owner(namespace, bundle)
        if owner is not None:
            return owner
        chosen = await self._choose_owner(namespace, bundle, authoritative)
        if chosen != self.broker_id:
            target = await self._live_broker(chosen)
            if target is not None:
                return target
        return await self._ownership.acquire(namespace, bundle)

    async def _live_broker(self, broker_id: str) -> BrokerInfo | None:
        return next((b for b in await self._ownership.brokers() if b.broker_id == broker_id), None)

    async def _choose_owner(self, namespace: str, bundle: Bundle, authoritative: bool) -> str:
        """Who should take a bundle nobody owns: the destination of a transfer under way (this
        broker included) if it is live, else this broker for an authoritative lookup, else
        placement's choice (never this broker while it shuts down: the bundle would move again)."""
        heading = await self._ownership.handover(namespace, bundle)
        if heading is not None and (heading == self.broker_id or await self._live_broker(heading)):
            return heading
        if self._ownership.leaving:
            return await self._placement.choose_broker(exclude={self.broker_id})
        return self.broker_id if authoritative else await self._placement.choose_broker()

    # -- unload and transfer --------------------------------------------------------------------
    def _stop_serving(self, namespace: str, bundle: Bundle, topics: list[Topic]) -> list[str]:
        """Producers and consumers that come now are refused until a lookup finds the next owner;
        the names of ``topics``, the bundle's (found by the caller in the same turn of the loop)."""
        self._ownership.owned.discard((namespace, bundle))
        return sorted(str(t.name) for t in topics)

    async def unload(self, namespace: str, bundle: Bundle) -> list[str]:
        """Pulsar's unload: seal the bundle's topics, release it, then tell clients, who look
        their topics up again."""
        topics = self._topics.in_bundle(namespace, bundle)
        self._stop_serving(namespace, bundle, topics)

        async def release() -> None:
            await self._ownership.release(namespace, bundle)

        await self._topics.evict(topics, after_close=release)
        log.info("unloaded %s/%s (%d topics)", namespace, bundle.name, len(topics))
        return sorted(str(t.name) for t in topics)

    async def split(self, namespace: str, bundle: Bundle, commit: SplitCommit) -> tuple[Bundle, Bundle]:
        """Pulsar's split by the owner: it takes both halves before ``commit`` changes the
        namespace's boundaries and lets go of the whole range after, so a lookup at any moment
        finds the range owned, and the topics stay loaded here, served without a break. (Unloading
        first left the range unowned until the boundaries changed: a client looking up then took
        the old bundle on another broker, which kept serving it once it no longer existed.)"""
        if not self.owns(namespace, bundle):
            return await commit(namespace, bundle)
        taken: list[Bundle] = []
        try:
            for half in bundle.halves():
                owner = await self._ownership.acquire(namespace, half)
                if owner.broker_id != self.broker_id:
                    raise NamespaceError(f"bundle {half.name} is owned by {owner.broker_id} already", 409)
                taken.append(half)
            halves = await commit(namespace, bundle)
        except BaseException:
            for half in taken:
                await self._ownership.release(namespace, half)
            raise
        await self._ownership.release(namespace, bundle)
        log.info("split %s/%s into %s and %s", namespace, bundle.name, halves[0].name, halves[1].name)
        return halves

    async def transfer(self, namespace: str, bundle: Bundle, destination: str) -> list[str]:
        """Hand the bundle to ``destination`` (a broker id) so clients move without a backoff:
        fence the topics, send the clients there, close, release, have the destination take the
        bundle. Falls back to an unload if the destination fails.

        The clients are sent as soon as every send taken here has its receipt, before the
        handover ends, when the destination prepared the topics (it holds their PRODUCER and
        SUBSCRIBE until it owns the bundle); else once it has taken the bundle.

        A transfer to this broker is done already (nothing happens: asking again after a failed
        transfer is safe). NamespaceError (400) before anything is done when ``destination`` is
        no live broker; (503) after the fact when the destination did not take the bundle, which
        was then unloaded (the caller may ask its next owner again)."""
        if destination == self.broker_id:
            return sorted(str(t.name) for t in self._topics.in_bundle(namespace, bundle))
        target = await self._live_broker(destination)
        if target is None:
            message = f"{destination} is not an active broker: {namespace}/{bundle.name} stays here"
            raise NamespaceError(message, 400)
        # The destination creates the next ledgers while the topics are still written here.
        upcoming = sorted(str(t.name) for t in self._topics.in_bundle(namespace, bundle))
        prepared, announced = await asyncio.gather(
            self._peers.prepare(target, namespace, bundle, upcoming),
            self._announce_handover(namespace, bundle, destination),
        )
        topics = self._topics.in_bundle(namespace, bundle)
        names = self._stop_serving(namespace, bundle, topics)
        sent: BrokerInfo | None = target
        failure = ""

        def early(drained: bool) -> BrokerInfo | None:
            if not (prepared and drained and set(names) <= set(upcoming)):
                return None
            # Lookups here answer the destination too, until it owns the bundle (a client that
            # looks the topic up again must not be sent back and refused).
            self._outgoing[(namespace, bundle)] = target
            return target

        async def hand_over() -> BrokerInfo | None:
            nonlocal sent, failure
            try:
                await self._ownership.release(namespace, bundle)
                await self._peers.acquire(target, namespace, bundle, names)
            except Exception as exc:  # PeerError, or the store refused the release
                failure = f"transfer of {namespace}/{bundle.name} to {destination} failed ({exc})"
                log.warning("%s: unloading instead", failure)
                sent = None
            finally:
                self._outgoing.pop((namespace, bundle), None)
                if announced:
                    self._background.spawn(self._end_handover(namespace, bundle))
            return sent

        await self._topics.evict(topics, early=early, after_close=hand_over)
        if failure:
            raise NamespaceError(f"{failure}: the bundle was unloaded instead", 503)
        log.info("transferred %s/%s to %s (%d topics)", namespace, bundle.name, destination, len(topics))
        return names

    async def _announce_handover(self, namespace: str, bundle: Bundle, destination: str) -> bool:
        """Name the destination to every broker's lookups (``Ownership.announce_handover``);
        False if the store refused: the transfer goes on, as before, without it."""
        try:
            await self._ownership.announce_handover(namespace, bundle, destination)
        except MetadataError as exc:
            log.warning("transfer of %s/%s: destination not recorded (%s)", namespace, bundle.name, exc)
            return False
        return True

    async def _end_handover(self, namespace: str, bundle: Bundle) -> None:
        try:
            await self._ownership.end_handover(namespace, bundle)
        except MetadataError as exc:  # the node goes with this broker's session at the latest
            log.warning("transfer of %s/%s: record not removed (%s)", namespace, bundle.name, exc)

    # -- the destination's side of a transfer ---------------------------------------------------
    async def prepare(self, topics: list[str]) -> int:
        """Expect the topics (their clients may come before the handover ends: they wait for it),
        then create the next ledger of each; returns how many were prepared."""
        self.gate.expect_handover(topics)
        if self._ledgers is None:
            return 0
        ledgers = self._ledgers
        names = [TopicName.parse(t).managed_ledger_name for t in topics]
        room = asyncio.Semaphore(PREPARE_CONCURRENCY)

        async def one(name: str) -> None:
            async with room:
                await ledgers.prepare(name)

        # Shielded: a source that stopped waiting leaves ledgers created and kept (used by the
        # open that follows, or deleted after a while), never half-recorded.
        results = await asyncio.shield(asyncio.gather(*(one(n) for n in names), return_exceptions=True))
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            log.info("%d of %d topics not prepared: %s", len(failed), len(names), failed[0])
        return len(names) - len(failed)

    async def acquire_and_load(self, namespace: str, bundle: Bundle, topics: list[str]) -> str:
        """Take a bundle handed over by another broker and open its topics; the clients held
        meanwhile go on, or are refused if it failed. Returns the new owner's id."""
        try:
            owner = await self._ownership.acquire(namespace, bundle)
            if owner.broker_id != self.broker_id:
                raise NotServedError(f"bundle {namespace}/{bundle.name} is owned by {owner.broker_id}")
            await asyncio.gather(*(self._topics.get_or_load(name) for name in topics))
        finally:
            self.gate.handover_ended([_key(name) for name in topics])
        return owner.broker_id

    # -- metadata session -----------------------------------------------------------------------
    def on_session(self, state: SessionState) -> None:
        """An expired session took the broker's registration and its bundles' ownership nodes
        with it, so another broker may own them already: stop serving them at once, and register
        again once a new session is open."""
        if state is SessionState.EXPIRED:
            self._session_expired = True
            self._let_go_of_all()
        elif state is SessionState.CONNECTED and self._session_expired:
            self._session_expired = False
            self._background.spawn(self._register_again())

    def _let_go_of_all(self) -> None:
        """An unload without the release the session already did: new sends are refused (their
        clients resend them to the next owner), the sends taken get their receipts (or an error,
        if the next owner fenced the ledger meanwhile), and only then are clients sent away.
        Telling them first would make them resend what was stored and not yet acknowledged:
        stored twice without deduplication (a region frozen for longer than the session timeout
        comes back with every send of the freeze in its sockets)."""
        for namespace, bundle in self.owned():
            topics = self._topics.in_bundle(namespace, bundle)
            self._ownership.owned.discard((namespace, bundle))
            log.warning(
                "metadata session expired: no longer serving %s/%s (%d topics)",
                namespace,
                bundle.name,
                len(topics),
            )
            self._background.spawn(self._topics.evict(topics, timeout_s=self._session_timeout_s))

    async def _register_again(self) -> None:
        try:
            await self._ownership.register()
        except Exception as exc:  # the report loop registers it at its next round
            log.warning("registering again after a session expiry failed: %s", exc)
            return
        log.info("metadata session renewed: %s registered again", self.broker_id)

    # -- stopping -------------------------------------------------------------------------------
    async def move_all_away(self) -> None:
        """A graceful shutdown: every owned bundle is transferred to another broker (unloaded if
        there is none)."""
        for namespace, bundle in self.owned():
            destination = await self._placement.choose_broker(exclude={self.broker_id})
            with contextlib.suppress(Exception):
                await self._move_away(namespace, bundle, destination)
        await self._background.wait()

    async def _move_away(self, namespace: str, bundle: Bundle, destination: str) -> None:
        if destination != self.broker_id:
            try:
                await self.transfer(namespace, bundle, destination)
                return
            except NamespaceError as exc:  # (a failed handover has unloaded it already)
                log.warning("shutting down: %s", exc)
        await self.unload(namespace, bundle)
