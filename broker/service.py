"""The broker: accepts Pulsar-protocol connections and wires the broker's parts together.

Requests flow one way: a connection (cnx/connection.py, with cnx/producer_commands.py and
cnx/consumer_commands.py) asks the bundles (loadbalance/bundles.py: lookup, ownership, unload,
transfer) where a topic is served and the topic registry (topics.py) for the topic, which is a
topic (topic.py) over a managed ledger (managed_ledger/) over the ledger client and the bookies
(magnetar.bookie). Beside them: the admin REST (admin/), the policies (policies/), the load
manager (loadbalance/: load_manager.py, load_report.py), geo-replication (replication/), the
fenced-topic watchdog (fencing.py), Prometheus metrics (metrics.py) and the broker-to-broker gRPC
server (rpc_server.py: PIP-63 cursors, transfers).
This module builds them, starts them in order and stops them in the reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc

from magnetar.bookie.client import LedgerClient
from magnetar.broker.admin.app import AdminApi, AdminDeps
from magnetar.broker.authorization import Authorization
from magnetar.broker.auto_creation import AutoTopicCreation
from magnetar.broker.cnx.connection import ConnectionDeps, Connections, ServerConnection
from magnetar.broker.compaction.topic_compactions import Compactions
from magnetar.broker.config import BrokerConfig
from magnetar.broker.fencing import FencedTopicWatchdog
from magnetar.broker.loadbalance import load_report
from magnetar.broker.loadbalance.bundles import BundleGate, Bundles
from magnetar.broker.loadbalance.load_manager import LoadManager
from magnetar.broker.loadbalance.load_report import LoadSampler
from magnetar.broker.loadbalance.peers import PeerClient
from magnetar.broker.managed_ledger import ManagedLedgerFactory
from magnetar.broker.metrics import MetricsServer
from magnetar.broker.namespace import Bundle, Namespaces
from magnetar.broker.ownership import (
    READ_ONLY_BROKERS,
    READ_ONLY_BUNDLES,
    READ_ONLY_HANDOVERS,
    BrokerInfo,
    Ownership,
)
from magnetar.broker.partitions import PartitionedTopics
from magnetar.broker.policies.applied import PolicyUpdates
from magnetar.broker.policies.checks import policy_loops
from magnetar.broker.producer_names import ProducerNames
from magnetar.broker.read_only.cursor_client import CursorClient
from magnetar.broker.read_only.refusal import ProducerRefusal
from magnetar.broker.replication.manager import ReplicationManager
from magnetar.broker.rpc_server import start_rpc_server
from magnetar.broker.schemas.admission import SchemaAdmission
from magnetar.broker.schemas.registry import SchemaRegistry
from magnetar.broker.schemas.storage import SchemaStorage
from magnetar.broker.topic import TopicName
from magnetar.broker.topic_loader import ReadOnlyOpener, WritableOpener
from magnetar.broker.topics import Topics
from magnetar.common.background import BackgroundTasks
from magnetar.common.latency import LatencyHistogram
from magnetar.common.metadata import LeaderElection, MetadataStore, open_store
from magnetar.common.tls import CertificateReloader

log = logging.getLogger(__name__)


class BrokerService:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.port = 0
        self.web_port = 0
        self.rpc_port = 0
        #: the pulsar+ssl:// and https:// ports (broker_service_port_tls, web_service_port_tls)
        self.tls_port: int | None = None
        self.web_tls_port: int | None = None
        self.store: MetadataStore | None = None
        self.configuration_store: MetadataStore | None = None
        self.ledger_client: LedgerClient | None = None
        self.namespaces: Namespaces | None = None
        self.partitioned: PartitionedTopics | None = None
        self.policies: PolicyUpdates | None = None
        self.schemas: SchemaAdmission | None = None
        self.compactions: Compactions | None = None
        self.ownership: Ownership | None = None
        self.election: LeaderElection | None = None
        self.topics: Topics | None = None
        self.bundles: Bundles | None = None
        self.load_manager: LoadManager | None = None
        self.replication: ReplicationManager | None = None
        self.connections = Connections(config.broker_max_connections, config.broker_max_connections_per_ip)
        self._server: asyncio.Server | None = None
        self._tls_server: asyncio.Server | None = None
        #: checked at start, as the authentication below; one context for both TLS ports, so a
        #: renewed certificate reaches both
        self._tls_context = config.tls_server_context()
        self._metrics: MetricsServer | None = None
        #: SEND to SEND_RECEIPT on this broker (pulsar_broker_publish_latency), and each add to Qa
        #: bookies (the managed-ledger factory's): where a publish spends its time, from /metrics
        self.publish_latency = LatencyHistogram()
        self._write_latency = LatencyHistogram()
        self._rpc_server: grpc.aio.Server | None = None
        self._peers = PeerClient(config.broker_client_tls())
        self._cursor_client: CursorClient | None = None
        #: checked at start: a setting that cannot be used stops the broker before it serves
        self._authentication = config.authentication()
        self._auto_creation: AutoTopicCreation | None = None
        self._deps: ConnectionDeps | None = None
        #: what keeps the broker listed (registry, load reports, the campaign): stopped first
        self._reporting = BackgroundTasks()
        #: the other loops (replication policy checks, the fenced-topic watchdog)
        self._loops = BackgroundTasks()
        self._producer_names: ProducerNames | None = None
        self._stopped = asyncio.Event()

    @property
    def broker_id(self) -> str:
        return f"{self.config.advertised_address}:{self.port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.config.advertised_address}:{self.port}"

    @property
    def web_service_url(self) -> str:
        return f"http://{self.config.advertised_address}:{self.web_port}"

    @property
    def service_url_tls(self) -> str:
        return f"pulsar+ssl://{self.config.advertised_address}:{self.tls_port}" if self.tls_port else ""

    @property
    def web_service_url_tls(self) -> str:
        return f"https://{self.config.advertised_address}:{self.web_tls_port}" if self.web_tls_port else ""

    # -- starting -------------------------------------------------------------------------------
    async def start(self) -> None:
        config = self.config
        session_timeout_s = config.metadata_store_session_timeout_millis / 1000
        self.store = store = await open_store(config.metadata_store_url, session_timeout_s=session_timeout_s)
        url = config.configuration_metadata_store_url
        self.configuration_store = await open_store(url) if url else store
        self.namespaces = namespaces = Namespaces(self.configuration_store)
        self.partitioned = PartitionedTopics(self.configuration_store)
        self.policies = policies = PolicyUpdates.for_broker(config, namespaces, self.configuration_store)
        self._producer_names = await ProducerNames.start(store, config.cluster_name)
        self.ledger_client = LedgerClient(store, config.ledger_client())
        self.compactions = Compactions(self.ledger_client)
        factory = ManagedLedgerFactory(store, self.ledger_client, config.managed_ledger())
        self._write_latency = factory.write_latency
        # Bound now, served once everything is wired: the broker id is its address and port.
        self._server = await asyncio.start_server(
            self._accept, config.bind_address, config.broker_service_port, limit=1 << 20, start_serving=False
        )
        self.port = self._server.sockets[0].getsockname()[1]
        await self._bind_tls()
        self._reload_renewed_certificates()
        me = BrokerInfo(
            self.broker_id,
            self.service_url,
            "",
            config.cluster_name,
            listeners=config.listeners(),
            listeners_tls=config.listeners_tls(),
            service_url_tls=self.service_url_tls,
            web_listeners=config.listeners_web(),
            web_listeners_tls=config.listeners_web_tls(),
        )
        if config.read_only_broker:
            # PIP-63: the read-only pool registers and owns bundles among itself; the writable
            # pool is only looked at, to find the owner cursor updates go to.
            self.ownership = Ownership(
                store,
                me,
                brokers_root=READ_ONLY_BROKERS,
                bundles_root=READ_ONLY_BUNDLES,
                handovers_root=READ_ONLY_HANDOVERS,
            )
        else:
            self.ownership = Ownership(store, me)
            self.election = store.election("/loadbalance/leader", self.broker_id)
        ownership = self.ownership
        gate = BundleGate(namespaces, ownership)
        self.topics = topics = Topics(
            gate,
            self._opener(factory, me, policies),
            self.connections,
            factory,
            close_timeout_s=session_timeout_s,
        )
        self._auto_creation = AutoTopicCreation(
            config.auto_topic_creation(), namespaces, self.partitioned, topics
        )
        # In the configuration store: regions share schema versions, so a replicated message's
        # version means the same schema everywhere.
        self.schemas = SchemaAdmission(SchemaRegistry(SchemaStorage(self.configuration_store)), policies)
        sampler = LoadSampler(
            self.broker_id,
            topics,
            self.connections,
            lambda: sorted(ownership.owned),
            nic_speed_gbps=config.load_balancer_override_broker_nic_speed_gbps,
        )
        self.load_manager = LoadManager(config, store, ownership, namespaces, sampler, self.election)
        self.bundles = Bundles(
            gate,
            topics,
            ownership,
            namespaces,
            self.load_manager,
            self._peers,
            None if config.read_only_broker else factory,
            session_timeout_s=session_timeout_s,
        )
        self.replication = ReplicationManager(config, namespaces, topics)
        if not config.read_only_broker:
            topics.on_loaded(self.replication.topic_loaded)
        await self._start_endpoints(me)
        self._deps = self._connection_deps()
        await self._server.start_serving()
        if self._tls_server is not None:
            await self._tls_server.start_serving()
        await self._join_cluster()
        log.info("broker serving %s (metrics on %s/metrics)", self.service_url, self.web_service_url)
        if self._tls_context is not None:
            log.info(
                "broker serving TLS on %s %s", self.service_url_tls or "-", self.web_service_url_tls or "-"
            )

    async def _bind_tls(self) -> None:
        """The pulsar+ssl:// port, bound (served once everything is wired, as the plain one)."""
        config, context = self.config, self._tls_context
        if config.broker_service_port_tls is None or context is None:
            return
        self._tls_server = await asyncio.start_server(
            self._accept,
            config.bind_address,
            config.broker_service_port_tls,
            limit=1 << 20,
            ssl=context,
            # a plain-text client on this port, or one that never finishes its handshake, is
            # dropped after this long instead of holding a connection slot
            ssl_handshake_timeout=10.0,
            start_serving=False,
        )
        self.tls_port = self._tls_server.sockets[0].getsockname()[1]

    def _reload_renewed_certificates(self) -> None:
        config, context = self.config, self._tls_context
        if context is not None and config.tls_cert_refresh_check_duration_sec:
            reloader = CertificateReloader(
                context, config.tls_files(), config.tls_cert_refresh_check_duration_sec
            )
            self._loops.spawn(reloader.run())

    def _opener(
        self, factory: ManagedLedgerFactory, me: BrokerInfo, policies: PolicyUpdates
    ) -> WritableOpener | ReadOnlyOpener:
        config = self.config
        assert self.store is not None
        assert self.ledger_client is not None
        if not config.read_only_broker:
            in_memory = (self.store, self.ledger_client) if config.enable_non_persistent_topics else None
            return WritableOpener(
                factory,
                policies,
                deduplication_default=config.broker_deduplication_enabled,
                non_persistent=in_memory,
            )
        # A view of the writable pool's registry and ownership, to find where cursors live.
        self._cursor_client = CursorClient(
            Ownership(self.store, me), self._bundle_of_topic, tls=config.broker_client_tls()
        )
        return ReadOnlyOpener(
            self.store,
            self.ledger_client,
            factory.config,
            self._cursor_client,
            poll_interval_s=config.read_only_metadata_poll_interval_millis / 1000,
            watch=config.read_only_ledger_roll_detection == "watch",
        )

    async def _bundle_of_topic(self, topic: str) -> tuple[str, Bundle]:
        assert self.bundles is not None
        return await self.bundles.bundle_of(TopicName.parse(topic))

    async def _start_endpoints(self, me: BrokerInfo) -> None:
        """The admin REST and metrics, and the broker RPCs; their addresses complete the broker's
        registry record."""
        config = self.config
        assert self.topics is not None
        assert self.bundles is not None
        assert self.namespaces is not None
        assert self.load_manager is not None
        assert self.replication is not None
        assert self.partitioned is not None
        assert self.policies is not None
        assert self._auto_creation is not None
        assert self.schemas is not None
        assert self.compactions is not None
        self._metrics = MetricsServer(
            self.topics,
            self.bundles.lookup_stats,
            config.cluster_name,
            config.bind_address,
            config.web_service_port,
            latencies={
                "pulsar_broker_publish_latency_seconds": (
                    self.publish_latency,
                    "A publish on this broker: SEND received to SEND_RECEIPT sent",
                ),
                "pulsar_storage_write_latency_seconds": (
                    self._write_latency,
                    "A managed-ledger add: to the acknowledgement of Qa bookies",
                ),
            },
        )
        AdminApi(
            AdminDeps(
                cluster_name=config.cluster_name,
                namespaces=self.namespaces,
                bundles=self.bundles,
                topics=self.topics,
                partitioned=self.partitioned,
                replication_stats=self.replication.stats,
                policies=self.policies,
                auto_creation=self._auto_creation,
                leader=self.load_manager.leader,
                stores=[s for s in (self.store, self.configuration_store) if s is not None],
                schemas=self.schemas,
                compactions=self.compactions,
                authentication=self._authentication,
                broker_credentials=config.broker_client_credentials(),
                authorization=self._authorization(),
                listener_at=config.listener_at,
            )
        ).install(self._metrics.app)
        self.load_manager.install(self._metrics.app)
        web_tls = config.web_service_port_tls
        await self._metrics.start(
            (web_tls, self._tls_context) if web_tls is not None and self._tls_context else None
        )
        self.web_port = self._metrics.port
        self.web_tls_port = self._metrics.tls_port
        me.web_service_url = self.web_service_url
        me.web_service_url_tls = self.web_service_url_tls
        self._rpc_server, self.rpc_port = await start_rpc_server(
            self.topics,
            self.bundles,
            config.bind_address,
            config.broker_cursor_rpc_port,
            cursors=not config.read_only_broker,
            tls=config.broker_rpc_server_tls(),
        )
        me.cursor_rpc_address = f"{config.advertised_address}:{self.rpc_port}"

    async def _join_cluster(self) -> None:
        """Make sure the cluster and public/default exist, register, campaign for leadership."""
        assert self.store is not None
        assert self.namespaces is not None
        assert self.ownership is not None
        assert self.bundles is not None
        assert self.load_manager is not None
        assert self.replication is not None
        assert self.policies is not None
        cluster = self.config.cluster_name
        if not self.config.read_only_broker:  # the cluster's URLs are the writable brokers'
            await self.namespaces.set_cluster(
                cluster,
                self.web_service_url,
                self.config.cluster_broker_service_url or self.service_url,
                self.config.replication_listener_name,
                service_url_tls=self.web_service_url_tls,
                broker_service_url_tls=self.config.cluster_broker_service_url_tls or self.service_url_tls,
            )
        await self.namespaces.create_tenant("public", [cluster], exist_ok=True)
        await self.namespaces.create("public/default", exist_ok=True)
        await self.ownership.register()
        self.store.on_session_event(self.bundles.on_session)
        self._reporting.spawn(self._report_load())
        if self.election is None:
            return  # No load-manager leader: the read-only pool places bundles by lookups alone.
        self._reporting.spawn(self.election.campaign())
        self._reporting.spawn(self.load_manager.run())
        assert self.topics is not None
        self._loops.spawn(self.replication.run())
        assert self.compactions is not None
        loops = policy_loops(self.topics, self.connections, self.policies, self.config, self.compactions)
        for loop in loops:
            self._loops.spawn(loop)
        watchdog = FencedTopicWatchdog(
            self.topics, self.connections, self.config.topic_fencing_timeout_seconds
        )
        self._loops.spawn(watchdog.run())

    async def _report_load(self) -> None:
        assert self.ownership is not None
        assert self.topics is not None
        while True:
            await asyncio.sleep(5)
            me = self.ownership.me
            me.topics = len(self.topics)
            me.connections = len(self.connections)
            with contextlib.suppress(Exception):
                await self.ownership.report()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._deps is not None  # served only once start() has wired everything
        connection = ServerConnection(self._deps, reader, writer, self.connections.discard)
        refusal = self.connections.refusal(connection.ip)
        if refusal is not None:
            await connection.refuse(refusal)
            return
        self.connections.add(connection)
        await connection.serve()

    def _connection_deps(self) -> ConnectionDeps:
        assert self.topics is not None
        assert self.bundles is not None
        assert self.namespaces is not None
        assert self._auto_creation is not None
        assert self.schemas is not None
        assert self.compactions is not None
        read_only = None
        if self._cursor_client is not None:
            read_only = ProducerRefusal(
                self.service_url,
                self.config.cluster_name,
                self.namespaces,
                self._cursor_client,
                writable_broker_service_url=self.config.writable_broker_service_url,
            )
        return ConnectionDeps(
            config=self.config,
            topics=self._auto_creation,
            namespace_topics=self.topics,
            partitioned=self._auto_creation,
            lookups=self.bundles,
            new_producer_name=self._new_producer_name,
            schemas=self.schemas,
            compactions=self.compactions,
            read_only=read_only,
            authentication=self._authentication,
            authorization=self._authorization(),
            publish_latency=self.publish_latency,
        )

    def _authorization(self) -> Authorization | None:
        if not self.config.authorization_enabled:
            return None
        assert self.namespaces is not None
        return Authorization(enabled=True, super_users=self.config.super_users(), policies=self.namespaces)

    def _new_producer_name(self) -> str:
        assert self._producer_names is not None
        return self._producer_names()

    # -- stopping -------------------------------------------------------------------------------
    async def stop(self) -> None:
        """Graceful shutdown: every owned bundle is transferred to another broker (unloaded if
        there is none), then connections, topics and stores are closed."""
        for server in (self._server, self._tls_server):
            if server is not None:
                server.close()
        await self._leave_cluster()
        if self.bundles is not None:
            await self.bundles.move_all_away()
        await self.connections.close()
        if self.topics is not None:
            await self.topics.close()
        if self.compactions is not None:  # a run under way fails on its closed ledger
            await self.compactions.close()
        await self._loops.cancel()
        if self.replication is not None:
            await self.replication.close()
        if self._metrics is not None:
            await self._metrics.stop()
        if self._rpc_server is not None:
            await self._rpc_server.stop(grace=1)
        await self._peers.close()
        if self._cursor_client is not None:
            await self._cursor_client.close()
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
        await self._reporting.cancel()
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
