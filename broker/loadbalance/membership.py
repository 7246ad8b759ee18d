"""This broker's membership in its cluster (architecture §5), Pulsar's broker registry and leader
election service with the metadata a broker makes sure of at start.

Joining: the cluster's record (its URLs are the writable brokers'), the ``public`` tenant and the
``public/default`` namespace exist; the broker's registry record is written and kept current; a
writable broker campaigns for load-manager leadership and runs the load manager. Leaving is the
first step of a shutdown and undoes the last three, so that no broker places a bundle here or
waits for this one to lead while its bundles move away.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sized
from typing import Protocol

from magnetar.broker.config import BrokerConfig
from magnetar.broker.loadbalance import load_report
from magnetar.broker.namespace import Namespaces
from magnetar.broker.ownership import BrokerInfo, Ownership
from magnetar.common.background import BackgroundTasks
from magnetar.common.metadata import LeaderElection, MetadataStore

#: seconds between two updates of the registry record's counts
RECORD_REFRESH_S = 5


class Balancer(Protocol):
    """The load manager's loop, run while this broker is a member (see load_manager.py)."""

    async def run(self) -> None: ...


async def publish_cluster(namespaces: Namespaces, me: BrokerInfo, config: BrokerConfig) -> None:
    """The cluster's record, as ``pulsar initialize-cluster-metadata`` writes it: this broker's
    URLs unless the cluster is reached by other ones (a load balancer or DNS name in front)."""
    await namespaces.set_cluster(
        me.cluster,
        me.web_service_url,
        config.cluster_broker_service_url or me.service_url,
        config.replication_listener_name,
        service_url_tls=me.web_service_url_tls,
        broker_service_url_tls=config.cluster_broker_service_url_tls or me.service_url_tls,
    )


async def ensure_default_namespace(namespaces: Namespaces, cluster: str) -> None:
    """``public/default``, where a client's short topic names live."""
    await namespaces.create_tenant("public", [cluster], exist_ok=True)
    await namespaces.create("public/default", exist_ok=True)


class Membership:
    """The registry record, the campaign and the load manager of one broker; ``election`` is None
    in the read-only pool, which places bundles by lookups alone."""

    def __init__(
        self,
        store: MetadataStore,
        ownership: Ownership,
        election: LeaderElection | None,
        balancer: Balancer,
        *,
        topics: Sized,
        connections: Sized,
    ) -> None:
        self._store = store
        self._ownership = ownership
        self._election = election
        self._balancer = balancer
        self._topics = topics
        self._connections = connections
        self._tasks = BackgroundTasks()

    async def join(self) -> None:
        await self._ownership.register()
        self._tasks.spawn(self._keep_record_current())
        if self._election is None:
            return
        self._tasks.spawn(self._election.campaign())
        self._tasks.spawn(self._balancer.run())

    async def leave(self) -> None:
        """Stop reporting, leave the registry and the election; each step is tried whatever the
        previous one did (the store may be gone)."""
        await self._tasks.cancel()
        with contextlib.suppress(Exception):
            await self._ownership.unregister()
        if self._election is None:
            return  # the load manager, which publishes the load report, never ran
        with contextlib.suppress(Exception):
            await load_report.withdraw(self._store, self._ownership.me.broker_id)
        with contextlib.suppress(Exception):
            await self._election.resign()

    async def _keep_record_current(self) -> None:
        while True:
            await asyncio.sleep(RECORD_REFRESH_S)
            me = self._ownership.me
            me.topics = len(self._topics)
            me.connections = len(self._connections)
            with contextlib.suppress(Exception):
                await self._ownership.report()
