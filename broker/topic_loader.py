"""Opening a topic over its managed ledger: writable (the bundle's owner) or read-only (PIP-63);
a non-persistent topic over a managed ledger in memory (the owner's only)."""

from __future__ import annotations

from magnetar.bookie.client import LedgerClient
from magnetar.broker.managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory
from magnetar.broker.namespace import NamespacePolicies
from magnetar.broker.non_persistent.memory_ledger import MemoryLedger
from magnetar.broker.non_persistent.topic import NonPersistentTopic
from magnetar.broker.policies.applied import PolicyUpdates
from magnetar.broker.read_only.cursor_client import CursorClient
from magnetar.broker.read_only.ledger import ReadOnlyManagedLedger
from magnetar.broker.topic import Topic, TopicName, TopicNotAllowedError
from magnetar.common.metadata import MetadataStore


class WritableOpener:
    def __init__(
        self,
        factory: ManagedLedgerFactory,
        policies: PolicyUpdates,
        *,
        deduplication_default: bool,
        non_persistent: bool = False,
    ) -> None:
        self._factory = factory
        self._policies = policies
        self._deduplication_default = deduplication_default
        #: enableNonPersistentTopics: a non-persistent topic's ledger is in memory
        self._non_persistent = non_persistent

    async def open(self, name: TopicName, policies: NamespacePolicies) -> Topic:
        if name.domain == "non-persistent":
            return await self._open_non_persistent(name, policies)
        # The namespace's policy wins over the broker's default (as in Pulsar).
        dedup = policies.deduplication_enabled
        if dedup is None:
            dedup = self._deduplication_default
        ledger = await self._factory.open(name.managed_ledger_name)
        topic = await Topic.load(name, ledger, deduplication=dedup)
        await self._policies.loaded(topic, policies)
        return topic

    async def _open_non_persistent(self, name: TopicName, policies: NamespacePolicies) -> Topic:
        if not self._non_persistent:
            raise TopicNotAllowedError(f"{name}: non-persistent topics are disabled on this broker")
        ledger = MemoryLedger(name.managed_ledger_name, self._factory.config)
        await ledger.open()
        topic = NonPersistentTopic.open(name, ledger)
        await self._policies.loaded(topic, policies)
        return topic


class ReadOnlyOpener:
    """PIP-63: the ledger is tailed from the bookies, cursors live at the writable owner."""

    def __init__(
        self,
        store: MetadataStore,
        ledger_client: LedgerClient,
        config: ManagedLedgerConfig,
        cursors: CursorClient,
        *,
        poll_interval_s: float,
        watch: bool,
    ) -> None:
        self._store = store
        self._ledger_client = ledger_client
        self._config = config
        self._cursors = cursors
        self._poll_interval_s = poll_interval_s
        self._watch = watch

    async def open(self, name: TopicName, policies: NamespacePolicies) -> Topic:
        if name.domain == "non-persistent":  # nothing is stored for a read-only owner to read
            raise TopicNotAllowedError(f"{name}: a read-only broker cannot serve a non-persistent topic")
        ledger = ReadOnlyManagedLedger(
            name.managed_ledger_name,
            self._store,
            self._ledger_client,
            self._config,
            topic=str(name),
            cursors=self._cursors,
            poll_interval_s=self._poll_interval_s,
            watch=self._watch,
        )
        await ledger.open()
        return await Topic.load(name, ledger, deduplication=False)
