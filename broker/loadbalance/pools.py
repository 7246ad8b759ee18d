"""The pool of brokers this broker serves in (PIP-63; architecture §5): the writable brokers, or
the read-only brokers that serve consumers of topics owned writable elsewhere.

The two pools differ in where a broker registers and owns bundles, whether it campaigns for
load-manager leadership, how it opens a topic and whether it takes producers; the rest of the
broker is the same, given these parts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from magnetar.bookie.client import LedgerClient
from magnetar.broker.config import BrokerConfig
from magnetar.broker.managed_ledger import ManagedLedgerFactory
from magnetar.broker.namespace import Bundle, Namespaces
from magnetar.broker.ownership import (
    READ_ONLY_BROKERS,
    READ_ONLY_BUNDLES,
    READ_ONLY_HANDOVERS,
    BrokerInfo,
    Ownership,
)
from magnetar.broker.policies.applied import PolicyUpdates
from magnetar.broker.read_only.cursor_client import CursorClient
from magnetar.broker.read_only.refusal import ProducerRefusal
from magnetar.broker.topic_loader import ReadOnlyOpener, WritableOpener
from magnetar.common.metadata import LeaderElection, MetadataStore

#: where the writable pool elects its load-manager leader
LEADER_PATH = "/loadbalance/leader"


@dataclass
class Pool:
    ownership: Ownership
    #: the load-manager leadership this broker campaigns for (None: the read-only pool places
    #: bundles by lookups alone)
    election: LeaderElection | None
    opener: WritableOpener | ReadOnlyOpener
    #: read-only brokers: the cursor RPCs to the writable owners
    cursors: CursorClient | None = None

    def producer_refusal(
        self, service_url: str, config: BrokerConfig, namespaces: Namespaces
    ) -> ProducerRefusal | None:
        """What a read-only broker answers a producer: where to produce instead (None: writable)."""
        if self.cursors is None:
            return None
        return ProducerRefusal(
            service_url,
            config.cluster_name,
            namespaces,
            self.cursors,
            writable_broker_service_url=config.writable_broker_service_url,
        )

    async def close(self) -> None:
        if self.cursors is not None:
            await self.cursors.close()


def join_pool(
    config: BrokerConfig,
    store: MetadataStore,
    ledger_client: LedgerClient,
    factory: ManagedLedgerFactory,
    policies: PolicyUpdates,
    me: BrokerInfo,
    bundle_of: Callable[[str], Awaitable[tuple[str, Bundle]]],
) -> Pool:
    """The parts of ``config``'s pool for the broker ``me``; ``bundle_of`` finds a topic's
    namespace and bundle (the read-only pool asks the bundle's writable owner for cursors)."""
    if not config.read_only_broker:
        opener = WritableOpener(
            factory,
            policies,
            deduplication_default=config.broker_deduplication_enabled,
            non_persistent=config.enable_non_persistent_topics,
        )
        return Pool(Ownership(store, me), store.election(LEADER_PATH, me.broker_id), opener)
    # The read-only pool registers and owns bundles among itself; the writable pool is only
    # looked at, to find the owner cursor updates go to.
    ownership = Ownership(
        store,
        me,
        brokers_root=READ_ONLY_BROKERS,
        bundles_root=READ_ONLY_BUNDLES,
        handovers_root=READ_ONLY_HANDOVERS,
    )
    cursors = CursorClient(Ownership(store, me), bundle_of, tls=config.broker_client_tls())
    tail = ReadOnlyOpener(
        store,
        ledger_client,
        factory.config,
        cursors,
        poll_interval_s=config.read_only_metadata_poll_interval_millis / 1000,
        watch=config.read_only_ledger_roll_detection == "watch",
    )
    return Pool(ownership, None, tail, cursors)
