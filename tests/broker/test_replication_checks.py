"""The replication manager's periodic check: a namespace's policy change reaches its topics, and
topics whose namespace has not changed are not visited again (an idle broker of many topics)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from magnetar.broker.config import BrokerConfig
from magnetar.broker.namespace import NamespacePolicies, Namespaces
from magnetar.broker.replication.manager import ReplicationManager
from magnetar.broker.topic import Topic, TopicName
from magnetar.common.metadata import open_store
from magnetar.common.metadata.store import SessionExpiredError


class Registry:
    """The broker's loaded topics, as replication reads them."""

    def __init__(self, topics: list[Any]) -> None:
        self.topics = {str(t.name): t for t in topics}
        self.rounds = 0  # the check lists the loaded topics once a round

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def loaded(self) -> list[Topic]:
        self.rounds += 1
        return list(self.topics.values())


async def until(what: str, done: Any) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while not done():
        assert asyncio.get_running_loop().time() < deadline, f"{what} never happened"
        await asyncio.sleep(0.005)


def idle_topic(name: str) -> Any:
    """What the manager reads of a topic that replicates nowhere."""
    return SimpleNamespace(
        name=TopicName.parse(name), fenced=False, ledger=SimpleNamespace(cursors={}),
        replicated_subscriptions=None, on_close=[], subscriptions={},
    )  # fmt: skip


async def test_the_check_visits_only_topics_of_namespaces_whose_policies_changed(memory_url: str) -> None:
    store = await open_store(memory_url)
    namespaces = Namespaces(store)
    await namespaces.create_tenant("t", ["here"])
    for ns in ("t/quiet", "t/busy"):
        await namespaces.create(ns)
    topics = [idle_topic(f"persistent://t/quiet/q{i}") for i in range(50)]
    topics += [idle_topic(f"persistent://t/busy/b{i}") for i in range(50)]
    config = BrokerConfig(cluster_name="here", replication_policy_check_interval_seconds=0.01)
    registry = Registry(topics)
    manager = ReplicationManager(config, namespaces, registry)
    for t in topics:
        await manager.topic_loaded(t)

    visited: list[str] = []
    real = manager.reconcile

    async def reconcile(topic: Topic, known: dict[str, NamespacePolicies] | None = None) -> None:
        visited.append(str(topic.name))
        await real(topic, known)

    manager.reconcile = reconcile  # type: ignore[method-assign]
    checks = asyncio.create_task(manager.run())
    try:
        await until("five rounds of the check", lambda: registry.rounds >= 5)
        assert visited == [], "topics whose policies did not change were visited again"
        await namespaces.update("t/busy", {"replicated_subscriptions_snapshot_frequency_millis": 200})
        await until(
            "the policy change reaching the check", lambda: manager.snapshot_frequency_ms.get("t/busy")
        )
        rounds = registry.rounds
        await until("five more rounds", lambda: registry.rounds >= rounds + 5)
        assert sorted(set(visited)) == sorted(str(t.name) for t in topics[50:])
        assert len(visited) == 50, "a changed namespace's topics are visited once per change"
    finally:
        checks.cancel()
        await store.close()


async def test_the_check_outlives_a_metadata_store_that_fails_a_read(memory_url: str) -> None:
    """A ZooKeeper session that expires under the check fails that round, not the check: the next
    round still follows a policy change."""
    store = await open_store(memory_url)
    namespaces = Namespaces(store)
    await namespaces.create_tenant("t", ["here"])
    await namespaces.create("t/ns")
    topics = [idle_topic(f"persistent://t/ns/topic-{i}") for i in range(3)]
    config = BrokerConfig(cluster_name="here", replication_policy_check_interval_seconds=0.01)
    registry = Registry(topics)
    manager = ReplicationManager(config, namespaces, registry)
    for t in topics:
        await manager.topic_loaded(t)

    failures = 3
    real = namespaces.policies

    async def policies(namespace: str) -> NamespacePolicies:
        nonlocal failures
        if failures:
            failures -= 1
            raise SessionExpiredError(f"/admin/policies/{namespace}")
        return await real(namespace)

    namespaces.policies = policies  # type: ignore[method-assign]
    checks = asyncio.create_task(manager.run())
    try:
        await until("the failing reads", lambda: failures == 0 or checks.done())
        await namespaces.update("t/ns", {"replicated_subscriptions_snapshot_frequency_millis": 200})
        await until(
            "the policy change reaching the check after the failures",
            lambda: manager.snapshot_frequency_ms.get("t/ns") or checks.done(),
        )
        assert not checks.done(), f"the check stopped: {checks.exception()!r}"
    finally:
        checks.cancel()
        await store.close()


async def test_a_closed_topic_leaves_nothing_behind(memory_url: str) -> None:
    """A broker that loads and unloads many topics keeps no state for those it no longer has."""
    store = await open_store(memory_url)
    namespaces = Namespaces(store)
    await namespaces.create_tenant("t", ["here"])
    await namespaces.create("t/ns")
    topics = [idle_topic(f"persistent://t/ns/topic-{i}") for i in range(20)]
    registry = Registry(topics)
    manager = ReplicationManager(BrokerConfig(cluster_name="here"), namespaces, registry)
    try:
        for topic in topics:
            await manager.topic_loaded(topic)
        for topic in topics:
            for hook in topic.on_close:
                await hook()
            del registry.topics[str(topic.name)]
        assert manager._locks == {}, "the closed topics' locks are kept"
        assert manager._settled == {}
        assert manager.replicators == {}
    finally:
        await store.close()
