"""The periodic policy check: a namespace's change reaches each of its topics, a topic's own
policy reaches that topic alone, and topics whose policies did not change are passed over."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from magnetar.broker.managed_ledger import ManagedLedgerConfig
from magnetar.broker.namespace import Namespaces
from magnetar.broker.policies.applied import PolicyUpdates
from magnetar.broker.policies.data import Policies, TopicPolicyStore
from magnetar.broker.policies.topic_settings import TopicSettings
from magnetar.broker.topic import Topic, TopicName
from magnetar.common.metadata import open_store


class Loaded:
    def __init__(self, topics: list[Any]) -> None:
        self.topics = topics
        self.rounds = 0  # the check lists the loaded topics once a round

    def loaded(self) -> list[Topic]:
        self.rounds += 1
        return self.topics


class CountedSettings(TopicSettings):
    def __init__(self) -> None:
        super().__init__()
        self.applied = 0

    def apply(self, policies: Policies, ledger: Any) -> None:
        self.applied += 1
        super().apply(policies, ledger)


def a_topic(name: str) -> Any:
    return SimpleNamespace(
        name=TopicName.parse(name),
        settings=CountedSettings(),
        ledger=SimpleNamespace(config=ManagedLedgerConfig()),
    )


async def until(what: str, done: Any) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while not done():
        assert asyncio.get_running_loop().time() < deadline, f"{what} never happened"
        await asyncio.sleep(0.005)


async def test_a_change_reaches_its_topics_and_unchanged_topics_are_passed_over(memory_url: str) -> None:
    store = await open_store(memory_url)
    namespaces = Namespaces(store)
    await namespaces.create_tenant("t", ["here"])
    await namespaces.create("t/ns")
    topics = [a_topic(f"persistent://t/ns/topic-{i}") for i in range(20)]
    updates = PolicyUpdates(namespaces, TopicPolicyStore(store), Policies(), interval_s=0.01)
    for topic in topics:
        await updates.loaded(topic, await namespaces.policies("t/ns"))
    assert all(t.settings.applied == 1 for t in topics)
    loaded = Loaded(topics)
    checks = asyncio.create_task(updates.run(loaded))
    try:
        await until("five rounds of the check", lambda: loaded.rounds >= 5)
        assert all(t.settings.applied == 1 for t in topics), "unchanged policies were applied again"

        await namespaces.set_topic_policy("t/ns", "messageTTL", 60)
        await until(
            "the namespace's TTL on every topic",
            lambda: all(t.settings.policies.messageTTL == 60 for t in topics),
        )
        await updates.store.update("persistent://t/ns/topic-3", {"messageTTL": 5})
        await until("topic-3's own TTL", lambda: topics[3].settings.policies.messageTTL == 5)
        rounds = loaded.rounds
        await until("five more rounds", lambda: loaded.rounds >= rounds + 5)
        assert [t.settings.policies.messageTTL for t in topics] == [60] * 3 + [5] + [60] * 16
        assert all(t.settings.applied == 2 for i, t in enumerate(topics) if i != 3)
    finally:
        checks.cancel()
        await store.close()
