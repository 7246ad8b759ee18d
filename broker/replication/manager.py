"""Which loaded topics replicate to which clusters: one replicator per topic and remote cluster
of its namespace's ``replication_clusters`` (when the local cluster is one of them).

Replicators start when a topic loads and stop when it closes (unload, transfer, shutdown: the
next owner starts them again from their cursors). Policy changes (``set-clusters``) are picked
up every ``replication_policy_check_interval_seconds``: a cluster added gets a replicator, a
cluster removed loses its replicator and its cursor (as in Pulsar). The check visits only the
topics of namespaces whose policies changed since their topic last matched them in full, and
topics still waiting for a cluster (one not registered yet).

Replicators reach remote clusters with the broker's client credentials and TLS settings
(``remote_access``): the cluster's ``brokerServiceUrlTls`` with ``broker_client_tls_enabled``,
its ``brokerServiceUrl`` without.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from magnetar.broker.config import BrokerConfig
from magnetar.broker.namespace import NamespaceError, NamespacePolicies, Namespaces
from magnetar.broker.replication.remote_access import RemoteAccess, RemoteAddressError
from magnetar.broker.replication.replicated_subscriptions import ReplicatedSubscriptionsController
from magnetar.broker.replication.replicator import CURSOR_PREFIX, Replicator, cursor_name
from magnetar.broker.topic import Topic

log = logging.getLogger(__name__)


class LoadedTopics(Protocol):
    """The broker's topic registry, as replication reads it."""

    def get(self, name: str) -> Topic | None: ...

    def loaded(self) -> list[Topic]: ...


class ReplicationManager:
    def __init__(self, config: BrokerConfig, namespaces: Namespaces, topics: LoadedTopics) -> None:
        self._config = config
        self._namespaces = namespaces
        self._topics = topics
        #: how replicators reach remote clusters (read once: the settings do not change live)
        self._access = RemoteAccess.from_config(config)
        #: clusters whose missing address was logged (once each, not every check)
        self._unreachable: set[str] = set()
        #: topic name -> remote cluster -> replicator
        self.replicators: dict[str, dict[str, Replicator]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        #: topic name -> the namespace policies its replicators last matched in full: the periodic
        #: check skips it while they are the same (the namespace's unchanged policies are the same
        #: object), so an idle broker does not visit thousands of topics every few seconds
        self._settled: dict[str, NamespacePolicies] = {}
        #: namespace -> snapshot frequency of its policy (PIP-33), when it sets one
        self.snapshot_frequency_ms: dict[str, int] = {}
        #: namespace -> (a) of its policy, when it sets it
        self.carry_acks: dict[str, bool] = {}

    @property
    def local_cluster(self) -> str:
        return self._config.cluster_name

    async def topic_loaded(self, topic: Topic) -> None:
        """Start the topic's replicators; they stop when it closes."""
        topic.on_close.append(lambda: self._topic_closed(topic))
        try:
            await self.reconcile(topic)
        except Exception as exc:  # the topic serves anyway; the next check starts them
            log.warning("replicators of %s not started yet: %s", topic.name, exc)

    async def _topic_closed(self, topic: Topic) -> None:
        self._settled.pop(str(topic.name), None)
        self._forget_lock(str(topic.name))
        replicators = self.replicators.pop(str(topic.name), {})
        await asyncio.gather(*(r.close() for r in replicators.values()), return_exceptions=True)
        await self._stop_snapshots(topic)

    def _forget_lock(self, name: str) -> None:
        """Drop a closing topic's lock, so a broker that sees many topics come and go keeps none
        of theirs; unless a check holds it, which the topic's next load here must still wait for
        (a lock left so is taken again by that load)."""
        lock = self._locks.get(name)
        if lock is not None and not lock.locked():
            del self._locks[name]

    async def _stop_snapshots(self, topic: Topic) -> None:
        controller, topic.replicated_subscriptions = topic.replicated_subscriptions, None
        if controller is not None:
            await controller.close()

    def _start_snapshots(self, topic: Topic) -> None:
        """PIP-33 for the topic (it takes snapshots only while it has replicated subscriptions)."""
        config = self._config
        name = str(topic.name)
        controller = ReplicatedSubscriptionsController(
            topic,
            self.local_cluster,
            lambda: set(self.replicators.get(name, {})),
            frequency_ms=lambda: self.snapshot_frequency_ms.get(
                topic.name.namespace_name, config.replicated_subscriptions_snapshot_frequency_millis
            ),
            timeout_s=config.replicated_subscriptions_snapshot_timeout_seconds,
            cache_size=config.replicated_subscriptions_snapshot_max_cached_per_subscription,
            carry_acks=lambda: self.carry_acks.get(
                topic.name.namespace_name, config.replicated_subscriptions_carry_individual_acks
            ),
            resume_without_removed=lambda: config.replicated_subscriptions_resume_without_removed_clusters,
        )
        for subscription in topic.subscriptions.values():
            subscription.snapshots.size = controller.cache_size
        topic.replicated_subscriptions = controller
        controller.start()

    async def remote_clusters(
        self, topic: Topic, known: dict[str, NamespacePolicies] | None = None
    ) -> set[str]:
        """The namespace's clusters other than this one (none when this one is not among them);
        ``known``: policies already read in this round, by namespace. A non-persistent topic
        is not replicated (Magnetar's replicators read what is stored)."""
        if not topic.name.is_persistent:
            return set()
        policies = await self._policies(topic.name.namespace_name, known)
        if policies is None:
            return set()
        if policies.replicated_subscriptions_carry_acks is None:
            self.carry_acks.pop(topic.name.namespace_name, None)
        else:
            self.carry_acks[topic.name.namespace_name] = policies.replicated_subscriptions_carry_acks
        frequency = policies.replicated_subscriptions_snapshot_frequency_millis
        if frequency is None:
            self.snapshot_frequency_ms.pop(topic.name.namespace_name, None)
        else:
            self.snapshot_frequency_ms[topic.name.namespace_name] = frequency
        clusters = set(policies.replication_clusters)
        if self.local_cluster not in clusters:
            return set()
        return clusters - {self.local_cluster}

    async def _policies(
        self, namespace: str, known: dict[str, NamespacePolicies] | None
    ) -> NamespacePolicies | None:
        """The namespace's policies (None: it is gone), from ``known`` when read this round."""
        policies = None if known is None else known.get(namespace)
        if policies is None:
            try:
                policies = await self._namespaces.policies(namespace)
            except NamespaceError:
                return None
            if known is not None:
                known[namespace] = policies
        return policies

    async def reconcile(self, topic: Topic, known: dict[str, NamespacePolicies] | None = None) -> None:
        """Make the topic's replicators match its namespace's clusters."""
        name = str(topic.name)
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        known = {} if known is None else known
        async with lock:
            if self._topics.get(name) is not topic or topic.fenced:
                return  # closed, or being sealed: its next load starts replication afresh
            self._settled.pop(name, None)
            wanted = await self.remote_clusters(topic, known)
            running = self.replicators.setdefault(name, {})
            for remote, replicator in list(running.items()):
                if replicator.topic is not topic:  # an earlier load's, reading a closed ledger
                    await running.pop(remote).close()
            for remote in sorted(set(running) - wanted):
                await running.pop(remote).close()
                with contextlib.suppress(Exception):
                    await topic.ledger.delete_cursor(cursor_name(remote))
                log.info("replication of %s to %s stopped (cluster removed)", name, remote)
            for remote in sorted(wanted - set(running)):
                address = await self._address(remote)
                if address is None:
                    continue  # not registered yet: the next check tries again
                url, listener_name = address
                replicator = Replicator(
                    topic,
                    self.local_cluster,
                    remote,
                    url,
                    queue_size=self._config.replication_producer_queue_size,
                    remote_listener_name=self._config.replication_outbound_listener_name or listener_name,
                    access=self._access,
                )
                await replicator.start()
                running[remote] = replicator
                log.info("replication of %s to %s started", name, remote)
            if running and topic.replicated_subscriptions is None:
                self._start_snapshots(topic)
            elif not running:
                await self._stop_snapshots(topic)
            # Cursors of clusters removed while the topic was not loaded here.
            for cursor in [c for c in topic.ledger.cursors if c.startswith(CURSOR_PREFIX)]:
                if cursor[len(CURSOR_PREFIX) :] not in wanted:
                    with contextlib.suppress(Exception):
                        await topic.ledger.delete_cursor(cursor)
            policies = known.get(topic.name.namespace_name)
            if policies is not None and set(running) == wanted and self._topics.get(name) is topic:
                self._settled[name] = policies

    async def _address(self, cluster: str) -> tuple[str, str] | None:
        """(service URL, listenerName) of a registered cluster: its brokerServiceUrlTls on TLS,
        its brokerServiceUrl otherwise."""
        try:
            data = await self._namespaces.cluster(cluster)
        except NamespaceError:
            log.warning("replication to %s waits: the cluster is not registered", cluster)
            return None
        try:
            url = self._access.service_url(cluster, data)
        except RemoteAddressError as exc:
            if cluster not in self._unreachable:
                self._unreachable.add(cluster)
                log.warning("replication to %s waits: %s", cluster, exc)
            return None
        self._unreachable.discard(cluster)
        return url, data.get("listenerName", "")

    async def run(self) -> None:
        """Follow policy changes (and clusters registered late)."""
        interval = self._config.replication_policy_check_interval_seconds
        while True:
            await asyncio.sleep(interval)
            known: dict[str, NamespacePolicies] = {}  # one read per namespace per round
            for topic in self._topics.loaded():
                try:
                    settled = self._settled.get(str(topic.name))
                    if settled is not None and settled is await self._policies(
                        topic.name.namespace_name, known
                    ):
                        continue
                    await self.reconcile(topic, known)
                except Exception as exc:
                    log.warning("replication check of %s failed: %s", topic.name, exc)

    def stats(self, topic: Topic) -> dict[str, dict[str, object]]:
        """The ``replication`` section of the topic's stats, per remote cluster."""
        return {remote: r.stats() for remote, r in sorted(self.replicators.get(str(topic.name), {}).items())}

    async def close(self) -> None:
        for replicators in list(self.replicators.values()):
            await asyncio.gather(*(r.close() for r in replicators.values()), return_exceptions=True)
        self.replicators.clear()
