"""The broker: accepts Pulsar-protocol connections and serves the topics of the bundles it owns.

Lookups on any broker answer Connect (this broker owns the bundle, or just took it) or Redirect
(another broker owns it, or the least-loaded broker should take it). Bundles leave a broker by
unload (clients reconnect with backoff and look the topic up again) or by transfer (the
destination takes ownership first and clients are sent straight to it).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Coroutine
from typing import Any

import grpc

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.broker import load_report
from magnetar.broker.admin import AdminApi
from magnetar.broker.config import BrokerConfig
from magnetar.broker.connection import ServerConnection
from magnetar.broker.fencing import FencedTopicWatchdog
from magnetar.broker.handover import ask_to_prepare
from magnetar.broker.load_manager import LoadManager
from magnetar.broker.managed_ledger import ManagedLedgerFactory
from magnetar.broker.metrics import MetricsServer
from magnetar.broker.namespace import Bundle, NamespacePolicies, Namespaces
from magnetar.broker.namespace import topic_hash as _hash
from magnetar.broker.ownership import (
    READ_ONLY_BROKERS,
    READ_ONLY_BUNDLES,
    BrokerInfo,
    NotServedError,
    Ownership,
    listener_url,
)
from magnetar.broker.read_only.cursor_client import CursorClient
from magnetar.broker.read_only.cursor_service import start_cursor_server
from magnetar.broker.read_only.ledger import ReadOnlyManagedLedger
from magnetar.broker.replication.manager import ReplicationManager
from magnetar.broker.topic import InvalidTopicNameError, Topic, TopicName
from magnetar.common.metadata import LeaderElection, MetadataStore, SessionState, open_store

log = logging.getLogger(__name__)

#: how long a transfer's destination holds clients that came before it owns their bundle (the
#: source normally hands over within a fraction of a second; after this they are refused and look
#: the topic up again)
HANDOVER_HOLD_S = 10.0


def _topic_key(name: str) -> str:
    return str(TopicName.parse(name))


class BrokerService:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.store: MetadataStore | None = None
        self.ledger_client: LedgerClient | None = None
        self.factory: ManagedLedgerFactory | None = None
        self.topics: dict[str, Topic] = {}
        self._loading: dict[str, asyncio.Task[Topic]] = {}
        self._connections: set[ServerConnection] = set()
        self._server: asyncio.Server | None = None
        self._metrics: MetricsServer | None = None
        self._producer_names = itertools.count()
        self.port = 0
        self.web_port = 0
        self._stopped = asyncio.Event()
        self.configuration_store: MetadataStore | None = None
        self.namespaces: Namespaces | None = None
        self.ownership: Ownership | None = None
        self.election: LeaderElection | None = None
        self._background: list[asyncio.Task[None]] = []
        #: what keeps the broker listed (registry and load reports); stopped first at shutdown
        self._reporting: list[asyncio.Task[None]] = []
        self._campaign: asyncio.Task[None] | None = None
        self._session_expired = False
        #: topics a transfer is bringing here: their clients wait for the handover to end
        self._incoming: dict[str, asyncio.Future[None]] = {}
        #: bundles whose clients a transfer has sent to their destination, until it owns them
        self._outgoing: dict[tuple[str, Bundle], BrokerInfo] = {}
        #: closes of topics let go without a seal (session expiry, unloaded while loading), and
        #: registering again after a session expiry, still running
        self._background_work: set[asyncio.Task[None]] = set()
        self.load_manager = LoadManager(self)
        #: geo-replication: the replicators of the topics loaded here
        self.replication = ReplicationManager(self)
        #: PIP-63: writable brokers serve the cursor RPCs, read-only brokers call them
        self._cursor_server: grpc.aio.Server | None = None
        self.cursor_rpc_port = 0
        self.cursor_client: CursorClient | None = None

    @property
    def broker_id(self) -> str:
        return f"{self.config.advertised_address}:{self.port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.config.advertised_address}:{self.port}"

    @property
    def web_service_url(self) -> str:
        return f"http://{self.config.advertised_address}:{self.web_port}"

    async def start(self) -> None:
        session_timeout_s = self.config.metadata_store_session_timeout_millis / 1000
        self.store = await open_store(self.config.metadata_store_url, session_timeout_s=session_timeout_s)
        client_config = LedgerClientConfig(
            ensemble_size=self.config.managed_ledger_default_ensemble_size,
            write_quorum=self.config.managed_ledger_default_write_quorum,
            ack_quorum=self.config.managed_ledger_default_ack_quorum,
            rpc_timeout_s=self.config.bookkeeper_client_timeout_in_seconds,
            explicit_lac_interval_s=self.config.bookkeeper_explicit_lac_interval_in_mills / 1000,
        )
        self.ledger_client = LedgerClient(self.store, client_config)
        self.factory = ManagedLedgerFactory(self.store, self.ledger_client, self.config.managed_ledger())
        self._server = await asyncio.start_server(
            self._accept, self.config.bind_address, self.config.broker_service_port, limit=1 << 20
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._metrics = MetricsServer(self, self.config.bind_address, self.config.web_service_port)
        AdminApi(self).install(self._metrics.app)
        self.load_manager.install(self._metrics.app)
        await self._metrics.start()
        self.web_port = self._metrics.port
        if not self.config.read_only_broker:
            self._cursor_server, self.cursor_rpc_port = await start_cursor_server(
                self, self.config.bind_address, self.config.broker_cursor_rpc_port
            )
        await self._join_cluster()
        log.info("broker serving %s (metrics on %s/metrics)", self.service_url, self.web_service_url)

    async def _join_cluster(self) -> None:
        """Register, make sure the cluster and public/default exist, campaign for leadership."""
        assert self.store is not None
        url = self.config.configuration_metadata_store_url
        self.configuration_store = await open_store(url) if url else self.store
        self.namespaces = Namespaces(self.configuration_store)
        cluster = self.config.cluster_name
        if not self.config.read_only_broker:  # the cluster's URLs are the writable brokers'
            await self.namespaces.set_cluster(
                cluster,
                self.web_service_url,
                self.config.cluster_broker_service_url or self.service_url,
                self.config.replication_listener_name,
            )
        await self.namespaces.create_tenant("public", [cluster], exist_ok=True)
        await self.namespaces.create("public/default", exist_ok=True)
        me = BrokerInfo(
            self.broker_id, self.service_url, self.web_service_url, cluster, listeners=self.config.listeners()
        )
        if self.config.read_only_broker:
            # PIP-63: the read-only pool registers and owns bundles among itself; the writable
            # pool is only looked at, to find the owner cursor updates go to.
            self.ownership = Ownership(
                self.store, me, brokers_root=READ_ONLY_BROKERS, bundles_root=READ_ONLY_BUNDLES
            )
            await self.ownership.register()
            self.store.on_session_event(self._on_session)
            self.cursor_client = CursorClient(Ownership(self.store, me), self._bundle_of_topic)
            # No load-manager leader: the read-only pool places bundles by lookups alone.
            self._reporting = [asyncio.get_running_loop().create_task(self._report_load())]
            return
        me.cursor_rpc_address = f"{self.config.advertised_address}:{self.cursor_rpc_port}"
        self.ownership = Ownership(self.store, me)
        await self.ownership.register()
        self.store.on_session_event(self._on_session)
        self.election = self.store.election("/loadbalance/leader", self.broker_id)
        loop = asyncio.get_running_loop()
        self._campaign = loop.create_task(self.election.campaign())
        self._reporting = [loop.create_task(self._report_load()), loop.create_task(self.load_manager.run())]
        self._background.append(loop.create_task(self.replication.run()))
        self._background.append(loop.create_task(FencedTopicWatchdog(self).run()))

    async def _report_load(self) -> None:
        assert self.ownership is not None
        while True:
            await asyncio.sleep(5)
            me = self.ownership.me
            me.topics = len(self.topics)
            me.connections = len(self._connections)
            with contextlib.suppress(Exception):
                await self.ownership.report()

    # -- metadata session -------------------------------------------------------------------------
    def _on_session(self, state: SessionState) -> None:
        """An expired session took the broker's registration and its bundles' ownership nodes
        with it, so another broker may own them already: stop serving them at once (clients
        look their topics up again), and register again once a new session is open."""
        if state is SessionState.EXPIRED:
            self._session_expired = True
            self._let_go_of_all_bundles()
        elif state is SessionState.CONNECTED and self._session_expired:
            self._session_expired = False
            self._in_background(self._register_again())

    def _let_go_of_all_bundles(self) -> None:
        assert self.ownership is not None
        owned = sorted(self.ownership.owned)
        self.ownership.owned.clear()
        for namespace, bundle in owned:
            log.warning(
                "metadata session expired: no longer serving %s/%s (%d topics)",
                namespace,
                bundle.name,
                len(self._topics_in(namespace, bundle)),
            )
            self._in_background(self._seal_and_let_go(namespace, bundle))

    async def _seal_and_let_go(self, namespace: str, bundle: Bundle) -> None:
        """An unload without the release the session already did: new sends are refused (their
        clients resend them to the next owner), the sends taken get their receipts (or an error,
        if the next owner fenced the ledger meanwhile), and only then are clients sent away.
        Telling them first would make them resend what was stored and not yet acknowledged:
        stored twice without deduplication (a region frozen for longer than the session
        timeout comes back with every send of the freeze in its sockets)."""
        topics = self._topics_in(namespace, bundle)
        try:
            topics = await asyncio.wait_for(
                self._seal_bundle(namespace, bundle), self.config.metadata_store_session_timeout_millis / 1000
            )
        except Exception as exc:  # its next owner recovers what it left open
            log.info("%s/%s not sealed cleanly: %s", namespace, bundle.name, exc)
            for topic in topics:
                self._in_background(self._close_quietly(topic))
        self._let_go(topics)

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background_work.add(task)
        task.add_done_callback(self._background_work.discard)

    def _let_go(self, topics: list[Topic], assigned_broker_url: str | None = None) -> None:
        """Forget ``topics`` here (the next load opens their ledgers afresh) and send their
        clients away, to ``assigned_broker_url`` when there is one, else to a lookup."""
        for topic in topics:
            if self.topics.get(str(topic.name)) is topic:
                del self.topics[str(topic.name)]
            if self.factory is not None and self.factory.get(topic.ledger.name) is topic.ledger:
                self.factory.forget(topic.ledger.name)
        names = {str(t.name) for t in topics}
        for connection in list(self._connections):
            connection.close_producers_and_consumers(names, assigned_broker_url)

    async def _close_quietly(self, topic: Topic) -> None:
        try:
            await asyncio.wait_for(topic.close(), self.config.metadata_store_session_timeout_millis / 1000)
        except Exception as exc:  # its next owner recovers what it left open
            log.info("%s not closed cleanly: %s", topic.name, exc)

    async def _register_again(self) -> None:
        assert self.ownership is not None
        try:
            await self.ownership.register()
        except Exception as exc:  # the report loop registers it at its next round
            log.warning("registering again after a session expiry failed: %s", exc)
            return
        log.info("metadata session renewed: %s registered again", self.broker_id)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = ServerConnection(self, reader, writer)
        self._connections.add(connection)
        await connection.serve()

    @property
    def connections(self) -> list[ServerConnection]:
        return list(self._connections)

    def forget(self, connection: ServerConnection) -> None:
        self._connections.discard(connection)

    # -- topics ---------------------------------------------------------------------------------
    async def topic(self, name: str) -> Topic:
        """The topic ``name`` (``persistent://tenant/ns/topic``), loaded or created on first use;
        NotServedError when its bundle is not owned by this broker."""
        topic_name = TopicName.parse(name)
        key = str(topic_name)
        if key in self.topics:
            return self.topics[key]
        assert self.namespaces is not None
        assert self.ownership is not None
        # Read once: the bundle and the topic's settings come from the same policies.
        policies = await self.namespaces.policies(topic_name.namespace_name)
        namespace, bundle = topic_name.namespace_name, policies.bundle_for(key)
        held = self._incoming.get(key)
        if held is not None and (namespace, bundle) not in self.ownership.owned:
            await asyncio.shield(held)  # sent here by a transfer that is not over yet
            if key in self.topics:
                return self.topics[key]
        if (namespace, bundle) not in self.ownership.owned:
            raise NotServedError(f"{key} (bundle {namespace}/{bundle.name}) is not served by this broker")
        task = self._loading.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(topic_name, policies))
            self._loading[key] = task
        try:
            topic = await asyncio.shield(task)
        finally:
            if task.done():
                self._loading.pop(key, None)
        if (namespace, bundle) not in self.ownership.owned:
            # Unloaded while it was loading: it must not stay open beside the next owner's.
            if self.topics.get(key) is topic:
                self._let_go([topic])
                self._in_background(self._close_quietly(topic))
            raise NotServedError(
                f"{key} (bundle {namespace}/{bundle.name}) is no longer served by this broker"
            )
        return topic

    async def bundle_of(self, topic: TopicName) -> tuple[str, Bundle]:
        assert self.namespaces is not None
        policies = await self.namespaces.policies(topic.namespace_name)
        return topic.namespace_name, policies.bundle_for(str(topic))

    async def _bundle_of_topic(self, topic: str) -> tuple[str, Bundle]:
        return await self.bundle_of(TopicName.parse(topic))

    async def writable_service_url(self, topic: str) -> str:
        """Where producers of ``topic`` go (named in a read-only broker's refusal): the setting,
        else the topic's writable owner, else the cluster's broker service URL."""
        if self.config.writable_broker_service_url:
            return self.config.writable_broker_service_url
        if self.cursor_client is not None:
            with contextlib.suppress(Exception):
                owner = await self.cursor_client.writable_owner(topic)
                if owner is not None:
                    return owner.service_url
        assert self.namespaces is not None
        with contextlib.suppress(Exception):
            return (await self.namespaces.cluster(self.config.cluster_name))["brokerServiceUrl"]
        return "the writable brokers"

    async def _load_read_only(self, name: TopicName) -> Topic:
        assert self.store is not None
        assert self.ledger_client is not None
        assert self.factory is not None
        assert self.cursor_client is not None
        ledger = ReadOnlyManagedLedger(
            name.managed_ledger_name,
            self.store,
            self.ledger_client,
            self.factory.config,
            topic=str(name),
            cursors=self.cursor_client,
            poll_interval_s=self.config.read_only_metadata_poll_interval_millis / 1000,
            watch=self.config.read_only_ledger_roll_detection == "watch",
        )
        await ledger.open()
        topic = await Topic.load(name, ledger, deduplication=False)
        self.topics[str(name)] = topic
        return topic

    async def _load(self, name: TopicName, policies: NamespacePolicies) -> Topic:
        if self.config.read_only_broker:
            return await self._load_read_only(name)
        assert self.factory is not None
        # The namespace's policy wins over the broker's default (as in Pulsar).
        dedup = policies.deduplication_enabled
        if dedup is None:
            dedup = self.config.broker_deduplication_enabled
        ledger = await self.factory.open(name.managed_ledger_name)
        topic = await Topic.load(name, ledger, deduplication=dedup)
        self.topics[str(name)] = topic
        await self.replication.topic_loaded(topic)
        return topic

    async def lookup(
        self, topic: str, *, authoritative: bool = False, listener: str | None = None
    ) -> tuple[str, bool]:
        """(service URL, redirect?) for ``topic``: its owner, or a broker chosen to own it; the
        address of the ``listener`` when one is named (UnknownListenerError if not advertised)."""
        assert self.ownership is not None
        name = TopicName.parse(topic)
        if str(name) in self._incoming:  # a transfer brings it here: its clients wait here
            me = self.ownership.owner_record
            return listener_url(me.service_url, dict(me.listeners), me.broker_id, listener), False
        namespace, bundle = await self.bundle_of(name)
        outgoing = self._outgoing.get((namespace, bundle))
        if outgoing is not None:  # its clients were sent to the destination: so are lookups
            return listener_url(outgoing.service_url, outgoing.listeners, outgoing.broker_id, listener), True
        owner = await self.ownership.owner(namespace, bundle)
        if owner is None:
            if self.ownership.leaving:  # shutting down: a bundle taken now would move again
                chosen = await self.choose_broker(exclude={self.broker_id})
            else:
                chosen = self.broker_id if authoritative else await self.choose_broker()
            if chosen != self.broker_id:
                target = next((b for b in await self.ownership.brokers() if b.broker_id == chosen), None)
                if target is not None:
                    url = listener_url(target.service_url, target.listeners, target.broker_id, listener)
                    return url, True
            owner = await self.ownership.acquire(namespace, bundle)
        url = listener_url(owner.service_url, dict(owner.listeners), owner.broker_id, listener)
        return url, owner.broker_id != self.broker_id

    async def choose_broker(self, exclude: set[str] | None = None) -> str:
        """The least-loaded live broker (placement of the load manager)."""
        return await self.load_manager.choose_broker(exclude)

    # -- moving bundles -------------------------------------------------------------------------
    def _topics_in(self, namespace: str, bundle: Bundle) -> list[Topic]:
        return [
            t for t in self.topics.values()
            if t.name.namespace_name == namespace and bundle.contains(_hash(str(t.name)))
        ]  # fmt: skip

    async def unload(self, namespace: str, bundle: Bundle) -> list[str]:
        """Pulsar's unload: seal the bundle's topics, release it, then tell clients, who look
        their topics up again. Telling them only once every send taken here has its receipt
        keeps a receipt from reaching a closed producer, whose client would send it again."""
        assert self.ownership is not None
        topics = await self._seal_bundle(namespace, bundle)
        await self.ownership.release(namespace, bundle)
        self._let_go(topics)
        log.info("unloaded %s/%s (%d topics)", namespace, bundle.name, len(topics))
        return sorted(str(t.name) for t in topics)

    async def _seal_bundle(self, namespace: str, bundle: Bundle) -> list[Topic]:
        """Stop serving the bundle and seal its topics, before ownership is released: fenced
        (Topic.fence), then closed. Whatever the close meets, the managed ledger is closed, so
        this broker cannot append once the next owner has opened it: no message is stored twice
        or acknowledged by a deposed owner."""
        topics, _ = await self._fence_bundle(namespace, bundle)
        await self._close_topics(topics)
        return topics

    async def _fence_bundle(self, namespace: str, bundle: Bundle) -> tuple[list[Topic], bool]:
        """Stop serving the bundle (producers and consumers that come now are refused until a
        lookup finds its next owner) and fence its topics; True when no send is left in flight."""
        assert self.ownership is not None
        self.ownership.owned.discard((namespace, bundle))
        topics = self._topics_in(namespace, bundle)
        drained = await asyncio.gather(*(topic.fence() for topic in topics), return_exceptions=True)
        return topics, all(d is True for d in drained)

    async def _close_topics(self, topics: list[Topic]) -> None:
        # Side by side: the handover lasts as long as the slowest, not the sum.
        await asyncio.gather(*(topic.close() for topic in topics), return_exceptions=True)

    async def transfer(self, namespace: str, bundle: Bundle, destination: str) -> list[str]:
        """Hand the bundle to ``destination`` (a broker id) so clients move without a backoff:
        fence the topics, send the clients there, close, release, have the destination take
        the bundle. Falls back to an unload if the destination fails.

        The clients are sent as soon as every send taken here has its receipt (so none reaches a
        closed producer and is sent again), before the handover ends: they reconnect while it
        runs, and the destination, which prepared the topics, holds their PRODUCER and SUBSCRIBE
        until it owns the bundle. A destination that did not prepare would refuse them, so then
        they are sent once it has taken the bundle."""
        assert self.ownership is not None
        target = next((b for b in await self.ownership.brokers() if b.broker_id == destination), None)
        if target is None or destination == self.broker_id:
            log.warning(
                "transfer of %s/%s to %s impossible (not a live broker): unloading",
                namespace,
                bundle.name,
                destination,
            )
            return await self.unload(namespace, bundle)
        # The destination creates the next ledgers while the topics are still written here.
        upcoming = sorted(str(t.name) for t in self._topics_in(namespace, bundle))
        prepared = await ask_to_prepare(target, namespace, bundle, upcoming)
        topics, drained = await self._fence_bundle(namespace, bundle)
        early = prepared and drained and {str(t.name) for t in topics} <= set(upcoming)
        names = sorted(str(t.name) for t in topics)
        try:
            if early:
                # Lookups here answer the destination too, until it owns the bundle (a client
                # that looks the topic up again must not be sent back and refused).
                self._outgoing[(namespace, bundle)] = target
                self._let_go(topics, target.service_url)
            await self._close_topics(topics)
            await self.ownership.release(namespace, bundle)
            try:
                await self._ask_to_acquire(target, namespace, bundle, names)
            except Exception as exc:
                log.warning(
                    "transfer of %s/%s to %s failed (%s): unloading instead",
                    namespace,
                    bundle.name,
                    destination,
                    exc,
                )
                target = None
        finally:
            self._outgoing.pop((namespace, bundle), None)
        if not early:
            self._let_go(topics, target.service_url if target else None)
        log.info("transferred %s/%s to %s (%d topics)", namespace, bundle.name, destination, len(topics))
        return names

    async def _ask_to_acquire(
        self, target: BrokerInfo, namespace: str, bundle: Bundle, topics: list[str]
    ) -> None:
        import aiohttp

        url = f"{target.web_service_url}/admin/v2/internal/acquire/{namespace}/{bundle.name}"
        timeout = aiohttp.ClientTimeout(total=15)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, json={"topics": topics}) as response,
        ):
            if response.status != 200:
                raise RuntimeError(f"{url}: HTTP {response.status} {await response.text()}")

    async def acquire_and_load(self, namespace: str, bundle: Bundle, topics: list[str]) -> None:
        """Take a bundle handed over by another broker and open its topics; the clients held
        meanwhile (``expect_handover``) go on, or are refused if it failed."""
        assert self.ownership is not None
        try:
            owner = await self.ownership.acquire(namespace, bundle)
            if owner.broker_id != self.broker_id:
                raise NotServedError(f"bundle {namespace}/{bundle.name} is owned by {owner.broker_id}")
            await asyncio.gather(*(self.topic(name) for name in topics))
        finally:
            self._handover_ended([_topic_key(name) for name in topics])

    def expect_handover(self, topics: list[str]) -> None:
        """A transfer is bringing ``topics`` here: a PRODUCER or SUBSCRIBE for one of them that
        comes before this broker owns its bundle waits (at most ``HANDOVER_HOLD_S``) instead of
        being refused, so the source can send its clients here before the handover ends."""
        loop = asyncio.get_running_loop()
        for name in topics:
            key = _topic_key(name)
            held = self._incoming.get(key)
            if held is None or held.done():
                held = self._incoming[key] = loop.create_future()
                loop.call_later(HANDOVER_HOLD_S, self._handover_ended, [key], held)

    def awaits_handover(self, topic: str) -> bool:
        with contextlib.suppress(InvalidTopicNameError):
            return _topic_key(topic) in self._incoming
        return False

    def _handover_ended(self, keys: list[str], only: asyncio.Future[None] | None = None) -> None:
        for key in keys:
            held = self._incoming.get(key)
            if held is not None and (only is None or held is only):
                del self._incoming[key]
                if not held.done():
                    held.set_result(None)

    async def topics_of_namespace(self, namespace: str) -> list[str]:
        assert self.factory is not None
        names = await self.factory.list(f"{namespace}/persistent")
        return sorted(f"persistent://{namespace}/{n.rsplit('/', 1)[1]}" for n in names)

    def new_producer_name(self) -> str:
        return f"{self.config.cluster_name}-{self.port}-{next(self._producer_names)}"

    # -- stopping -------------------------------------------------------------------------------
    async def stop(self) -> None:
        """Graceful shutdown: every owned bundle is transferred to another broker (unloaded if
        there is none), then connections, topics and stores are closed."""
        if self._server is not None:
            self._server.close()
        await self._leave_cluster()
        if self.ownership is not None:
            for namespace, bundle in list(self.ownership.owned):
                destination = await self.choose_broker(exclude={self.broker_id})
                with contextlib.suppress(Exception):
                    if destination != self.broker_id:
                        await self.transfer(namespace, bundle, destination)
                    else:
                        await self.unload(namespace, bundle)
        for connection in list(self._connections):
            connection.close_producers_and_consumers()
        await asyncio.sleep(0.05)  # let the close commands leave before the sockets go
        for connection in list(self._connections):
            await connection.close()
        for topic in list(self.topics.values()):
            with contextlib.suppress(Exception):
                await topic.close()
        self.topics.clear()
        await asyncio.gather(*self._background_work, return_exceptions=True)
        for task in self._background:
            task.cancel()
        await self.replication.close()
        if self._metrics is not None:
            await self._metrics.stop()
        if self._cursor_server is not None:
            await self._cursor_server.stop(grace=1)
        if self.cursor_client is not None:
            await self.cursor_client.close()
        if self.ledger_client is not None:
            await self.ledger_client.close()
        if self.configuration_store is not None and self.configuration_store is not self.store:
            await self.configuration_store.close()
        if self.store is not None:
            await self.store.close()
        self._stopped.set()

    async def _leave_cluster(self) -> None:
        """First step of a shutdown: stop reporting, leave the registry and the election, so no
        broker places a bundle here or waits for this one to lead while its bundles move away."""
        tasks = [*self._reporting, *([self._campaign] if self._campaign is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.ownership is not None:
            with contextlib.suppress(Exception):
                await self.ownership.unregister()
        if self.store is not None and not self.config.read_only_broker:
            with contextlib.suppress(Exception):
                await load_report.withdraw(self.store, self.broker_id)
        if self.election is not None:
            with contextlib.suppress(Exception):
                await self.election.resign()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
