"""The broker: builds its parts, starts them in order and stops them in the reverse order
(architecture §2).

Requests flow one way: a connection (cnx/), accepted on the binary-protocol ports
(cnx/listeners.py), asks the bundles (loadbalance/bundles.py) where a topic is served and the
topic registry (topics.py) for the topic, a topic (topic.py) over a managed ledger
(managed_ledger/) over the ledger client and the bookies (magnetar.bookie). Beside them: the
admin REST (admin/), the policies (policies/), the load manager, the broker's pool and its
membership in the cluster (loadbalance/), geo-replication (replication/), the fenced-topic
watchdog (fencing.py), Prometheus metrics (metrics.py) and the broker RPCs (rpc_server.py).
"""

from __future__ import annotations

import asyncio
import logging

import grpc

from magnetar.bookie.client import LedgerClient
from magnetar.broker.admin.app import AdminApi, AdminDeps
from magnetar.broker.authorization import Authorization
from magnetar.broker.auto_creation import AutoTopicCreation
from magnetar.broker.cnx.connection import ConnectionDeps, Connections
from magnetar.broker.cnx.listeners import ProtocolListeners
from magnetar.broker.compaction.topic_compactions import Compactions
from magnetar.broker.config import BrokerConfig
from magnetar.broker.fencing import FencedTopicWatchdog
from magnetar.broker.loadbalance.bundles import BundleGate, Bundles
from magnetar.broker.loadbalance.load_manager import LoadManager
from magnetar.broker.loadbalance.load_report import LoadSampler
from magnetar.broker.loadbalance.membership import Membership, ensure_default_namespace, publish_cluster
from magnetar.broker.loadbalance.peers import PeerClient
from magnetar.broker.loadbalance.pools import Pool, join_pool
from magnetar.broker.managed_ledger import ManagedLedgerFactory
from magnetar.broker.metrics import MetricsServer, publish_latencies
from magnetar.broker.namespace import Bundle, Namespaces
from magnetar.broker.ownership import BrokerInfo, Ownership
from magnetar.broker.partitions import PartitionedTopics
from magnetar.broker.policies.applied import PolicyUpdates
from magnetar.broker.policies.checks import policy_loops
from magnetar.broker.producer_names import ProducerNames
from magnetar.broker.replication.manager import ReplicationManager
from magnetar.broker.rpc_server import start_rpc_server
from magnetar.broker.schemas.admission import SchemaAdmission
from magnetar.broker.schemas.registry import SchemaRegistry
from magnetar.broker.schemas.storage import SchemaStorage
from magnetar.broker.topic import TopicName
from magnetar.broker.topics import Topics
from magnetar.common.background import BackgroundTasks
from magnetar.common.latency import LatencyHistogram
from magnetar.common.metadata import LeaderElection, MetadataStore, open_store
from magnetar.common.tls import CertificateReloader

log = logging.getLogger(__name__)


class BrokerService:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.web_port = 0
        self.rpc_port = 0
        #: the https:// port (web_service_port_tls)
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
        self._listeners = ProtocolListeners(self.connections)
        self._pool: Pool | None = None
        self._membership: Membership | None = None
        #: checked at start, as the authentication below; one context for both TLS ports, so a
        #: renewed certificate reaches both
        self._tls_context = config.tls_server_context()
        self._metrics: MetricsServer | None = None
        #: SEND to SEND_RECEIPT on this broker (pulsar_broker_publish_latency)
        self.publish_latency = LatencyHistogram()
        self._rpc_server: grpc.aio.Server | None = None
        self._peers = PeerClient(config.broker_client_tls())
        #: checked at start: a setting that cannot be used stops the broker before it serves
        self._authentication = config.authentication()
        #: the loops beside the membership's (certificate reloading and, on writable brokers,
        #: replication policy checks, the policies' checks, the fenced-topic watchdog)
        self._loops = BackgroundTasks()
        self._stopped = asyncio.Event()

    @property
    def port(self) -> int:
        return self._listeners.port

    @property
    def tls_port(self) -> int | None:
        """The pulsar+ssl:// port (broker_service_port_tls), None without one."""
        return self._listeners.tls_port

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
        self.configuration_store = configuration_store = await open_store(url) if url else store
        self.namespaces = namespaces = Namespaces(configuration_store)
        self.partitioned = partitioned = PartitionedTopics(configuration_store)
        self.policies = policies = PolicyUpdates.for_broker(config, namespaces, configuration_store)
        producer_names = await ProducerNames.start(store, config.cluster_name)
        self.ledger_client = ledger_client = LedgerClient(store, config.ledger_client())
        await ledger_client.start()
        self.compactions = compactions = Compactions(ledger_client)
        factory = ManagedLedgerFactory(store, ledger_client, config.managed_ledger())
        # Bound now, served once everything is wired: the broker id is its address and port.
        await self._listeners.bind(
            config.bind_address, config.broker_service_port, config.broker_service_port_tls, self._tls_context
        )
        if self._tls_context is not None and config.tls_cert_refresh_check_duration_sec:
            period = config.tls_cert_refresh_check_duration_sec
            self._loops.spawn(CertificateReloader(self._tls_context, config.tls_files(), period).run())
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
        self._pool = pool = join_pool(
            config, store, ledger_client, factory, policies, me, self._bundle_of_topic
        )
        self.ownership = ownership = pool.ownership
        self.election = pool.election
        gate = BundleGate(namespaces, ownership)
        self.topics = topics = Topics(
            gate,
            pool.opener,
            self.connections,
            factory,
            close_timeout_s=session_timeout_s,
            max_concurrent_loads=config.max_concurrent_topic_load_request,
        )
        auto_creation = AutoTopicCreation(config.auto_topic_creation(), namespaces, partitioned, topics)
        # In the configuration store: regions share schema versions, so a replicated message's
        # version means the same schema everywhere.
        self.schemas = schemas = SchemaAdmission(SchemaRegistry(SchemaStorage(configuration_store)), policies)
        sampler = LoadSampler(
            self.broker_id,
            topics,
            self.connections,
            lambda: sorted(ownership.owned),
            nic_speed_gbps=config.load_balancer_override_broker_nic_speed_gbps,
        )
        self.load_manager = load_manager = LoadManager(
            config, store, ownership, namespaces, sampler, pool.election
        )
        self.bundles = bundles = Bundles(
            gate,
            topics,
            ownership,
            namespaces,
            load_manager,
            self._peers,
            None if config.read_only_broker else factory,
            session_timeout_s=session_timeout_s,
        )
        self.replication = replication = ReplicationManager(config, namespaces, topics)
        if not config.read_only_broker:
            topics.on_loaded(replication.topic_loaded)
        admin = AdminDeps(
            cluster_name=config.cluster_name,
            namespaces=namespaces,
            bundles=bundles,
            topics=topics,
            partitioned=partitioned,
            replication_stats=replication.stats,
            policies=policies,
            auto_creation=auto_creation,
            leader=load_manager.leader,
            stores=[store, configuration_store],
            schemas=schemas,
            compactions=compactions,
            authentication=self._authentication,
            broker_credentials=config.broker_client_credentials(),
            authorization=self._authorization(namespaces),
            listener_at=config.listener_at,
        )
        await self._start_endpoints(me, admin, topics, bundles, load_manager, factory.write_latency)
        connection_deps = ConnectionDeps(
            config=config,
            topics=auto_creation,
            namespace_topics=topics,
            partitioned=auto_creation,
            lookups=bundles,
            new_producer_name=producer_names,
            schemas=schemas,
            compactions=compactions,
            read_only=pool.producer_refusal(self.service_url, config, namespaces),
            authentication=self._authentication,
            authorization=self._authorization(namespaces),
            publish_latency=self.publish_latency,
        )
        await self._listeners.serve(connection_deps)
        if not config.read_only_broker:  # the cluster's URLs are the writable brokers'
            await publish_cluster(namespaces, me, config)
        await ensure_default_namespace(namespaces, config.cluster_name)
        self._membership = membership = Membership(
            store, ownership, pool.election, load_manager, topics=topics, connections=self.connections
        )
        await membership.join()
        store.on_session_event(bundles.on_session)
        if not config.read_only_broker:
            self._run_monitors(topics, replication, policies, compactions)
        log.info("broker serving %s (metrics on %s/metrics)", self.service_url, self.web_service_url)
        if self._tls_context is not None:
            log.info(
                "broker serving TLS on %s %s", self.service_url_tls or "-", self.web_service_url_tls or "-"
            )

    async def _bundle_of_topic(self, topic: str) -> tuple[str, Bundle]:
        assert self.bundles is not None
        return await self.bundles.bundle_of(TopicName.parse(topic))

    async def _start_endpoints(
        self,
        me: BrokerInfo,
        admin: AdminDeps,
        topics: Topics,
        bundles: Bundles,
        load_manager: LoadManager,
        write_latency: LatencyHistogram,
    ) -> None:
        """The admin REST and metrics, and the broker RPCs; their addresses complete the broker's
        registry record."""
        config = self.config
        self._metrics = MetricsServer(
            topics,
            bundles.lookup_stats,
            config.cluster_name,
            config.bind_address,
            config.web_service_port,
            latencies=publish_latencies(self.publish_latency, write_latency),
            per_topic=config.expose_topic_level_metrics_in_prometheus,
        )
        AdminApi(admin).install(self._metrics.app)
        load_manager.install(self._metrics.app)
        web_tls = config.web_service_port_tls
        await self._metrics.start(
            (web_tls, self._tls_context) if web_tls is not None and self._tls_context else None
        )
        self.web_port = self._metrics.port
        self.web_tls_port = self._metrics.tls_port
        me.web_service_url = self.web_service_url
        me.web_service_url_tls = self.web_service_url_tls
        self._rpc_server, self.rpc_port = await start_rpc_server(
            topics,
            bundles,
            config.bind_address,
            config.broker_cursor_rpc_port,
            cursors=not config.read_only_broker,
            tls=config.broker_rpc_server_tls(),
        )
        me.cursor_rpc_address = f"{config.advertised_address}:{self.rpc_port}"

    def _run_monitors(
        self,
        topics: Topics,
        replication: ReplicationManager,
        policies: PolicyUpdates,
        compactions: Compactions,
    ) -> None:
        """A writable broker's loops over its topics: replication's policy checks, the policies'
        checks (policies/checks.py), the fenced-topic watchdog."""
        self._loops.spawn(replication.run())
        for loop in policy_loops(topics, self.connections, policies, self.config, compactions):
            self._loops.spawn(loop)
        watchdog = FencedTopicWatchdog(topics, self.connections, self.config.topic_fencing_timeout_seconds)
        self._loops.spawn(watchdog.run())

    def _authorization(self, namespaces: Namespaces) -> Authorization | None:
        if not self.config.authorization_enabled:
            return None
        return Authorization(enabled=True, super_users=self.config.super_users(), policies=namespaces)

    # -- stopping -------------------------------------------------------------------------------
    async def stop(self) -> None:
        """Graceful shutdown: every owned bundle is transferred to another broker (unloaded if
        there is none), then connections, topics and stores are closed."""
        self._listeners.close()
        if self._membership is not None:
            # first: no broker places a bundle here or waits for this one to lead meanwhile
            await self._membership.leave()
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
        if self._pool is not None:  # a read-only broker's cursor RPCs
            await self._pool.close()
        if self.ledger_client is not None:
            await self.ledger_client.close()
        if self.configuration_store is not None and self.configuration_store is not self.store:
            await self.configuration_store.close()
        if self.store is not None:
            await self.store.close()
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
