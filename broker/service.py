"""The broker: accepts Pulsar-protocol connections and owns the topics it serves."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.broker.config import BrokerConfig
from magnetar.broker.connection import ServerConnection
from magnetar.broker.managed_ledger import ManagedLedgerFactory
from magnetar.broker.metrics import MetricsServer
from magnetar.broker.topic import Topic, TopicName
from magnetar.common.metadata import MetadataStore, open_store

log = logging.getLogger(__name__)


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

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.config.advertised_address}:{self.port}"

    @property
    def web_service_url(self) -> str:
        return f"http://{self.config.advertised_address}:{self.web_port}"

    async def start(self) -> None:
        self.store = await open_store(self.config.metadata_store_url)
        client_config = LedgerClientConfig(
            ensemble_size=self.config.managed_ledger_default_ensemble_size,
            write_quorum=self.config.managed_ledger_default_write_quorum,
            ack_quorum=self.config.managed_ledger_default_ack_quorum,
            rpc_timeout_s=self.config.bookkeeper_client_timeout_in_seconds,
        )
        self.ledger_client = LedgerClient(self.store, client_config)
        self.factory = ManagedLedgerFactory(self.store, self.ledger_client, self.config.managed_ledger())
        self._server = await asyncio.start_server(
            self._accept, self.config.bind_address, self.config.broker_service_port, limit=1 << 20
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._metrics = MetricsServer(self, self.config.bind_address, self.config.web_service_port)
        await self._metrics.start()
        self.web_port = self._metrics.port
        log.info("broker serving %s (metrics on %s/metrics)", self.service_url, self.web_service_url)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = ServerConnection(self, reader, writer)
        self._connections.add(connection)
        await connection.serve()

    def forget(self, connection: ServerConnection) -> None:
        self._connections.discard(connection)

    # -- topics ---------------------------------------------------------------------------------
    async def topic(self, name: str) -> Topic:
        """The topic ``name`` (``persistent://tenant/ns/topic``), loaded or created on first use."""
        topic_name = TopicName.parse(name)
        key = str(topic_name)
        if key in self.topics:
            return self.topics[key]
        task = self._loading.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(topic_name))
            self._loading[key] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._loading.pop(key, None)

    async def _load(self, name: TopicName) -> Topic:
        assert self.factory is not None
        ledger = await self.factory.open(name.managed_ledger_name)
        topic = await Topic.load(name, ledger, deduplication=self.config.broker_deduplication_enabled)
        self.topics[str(name)] = topic
        return topic

    async def lookup(self, topic: str) -> tuple[str, bool]:
        """Where ``topic`` is served: this broker (ownership across brokers arrives with bundles)."""
        return self.service_url, True

    async def topics_of_namespace(self, namespace: str) -> list[str]:
        assert self.factory is not None
        names = await self.factory.list(f"{namespace}/persistent")
        return sorted(f"persistent://{namespace}/{n.rsplit('/', 1)[1]}" for n in names)

    def new_producer_name(self) -> str:
        return f"{self.config.cluster_name}-{self.port}-{next(self._producer_names)}"

    # -- stopping -------------------------------------------------------------------------------
    async def stop(self) -> None:
        """Stop accepting, tell clients to go, close topics (cursors flushed, ledgers closed)."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.close_producers_and_consumers()
        await asyncio.sleep(0.05)  # let the close commands leave before the sockets go
        for connection in list(self._connections):
            await connection.close()
        for topic in list(self.topics.values()):
            with contextlib.suppress(Exception):
                await topic.close()
        self.topics.clear()
        if self._metrics is not None:
            await self._metrics.stop()
        if self.ledger_client is not None:
            await self.ledger_client.close()
        if self.store is not None:
            await self.store.close()
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
