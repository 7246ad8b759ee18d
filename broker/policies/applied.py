"""The policies that apply to each loaded topic (broker/policies/data.py says which win), handed to
its ``TopicSettings`` (broker/policies/topic_settings.py).

Resolved when the topic is loaded (its namespace's policies come with the load) and kept current:
the broker whose admin API takes a topic-level change applies it to its topics at once, and every
``topic_policies_check_interval_seconds`` each broker reads each namespace's policies and its
topic-level ones once and applies them. A topic that sets no policy of its own gets the one
object resolved for its namespace's current policies, so the check passes over it at the cost of
a comparison while they are unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from magnetar.broker.config import BrokerConfig
from magnetar.broker.policies.data import Policies, TopicPolicyStore, applied, own_policies

if TYPE_CHECKING:
    from magnetar.broker.namespace import NamespacePolicies
    from magnetar.broker.topic import Topic
    from magnetar.common.metadata import MetadataStore

log = logging.getLogger(__name__)

#: the policies of a topic that sets none
_NONE_SET = Policies()


class NamespacePolicySource(Protocol):
    async def policies(self, namespace: str) -> NamespacePolicies: ...


class LoadedTopics(Protocol):
    def loaded(self) -> list[Topic]: ...


class PolicyUpdates:
    def __init__(
        self,
        namespaces: NamespacePolicySource,
        store: TopicPolicyStore,
        defaults: Policies,
        interval_s: float,
    ) -> None:
        self._namespaces = namespaces
        self.store = store
        self.defaults = defaults
        self._interval_s = interval_s
        #: namespace -> (its policies, what applies to its topics that set none of their own)
        self._blanks: dict[str, tuple[NamespacePolicies, Policies]] = {}

    @classmethod
    def for_broker(
        cls, config: BrokerConfig, namespaces: NamespacePolicySource, store: MetadataStore
    ) -> PolicyUpdates:
        return cls(
            namespaces,
            TopicPolicyStore(store),
            config.topic_policy_defaults(),
            config.topic_policies_check_interval_seconds,
        )

    async def loaded(self, topic: Topic, namespace: NamespacePolicies) -> None:
        """A topic being loaded: its topic-level policies read, then all of them applied."""
        topic.settings.own = await self.store.get(str(topic.name))
        self.apply(topic, namespace)

    def apply(self, topic: Topic, namespace: NamespacePolicies) -> None:
        if topic.settings.own == _NONE_SET:
            resolved = self._blank(topic.name.namespace_name, namespace)
            if resolved is topic.settings.policies:
                return  # applied already, and neither its namespace's policies nor its own changed
        else:
            resolved = applied(topic.settings.own, namespace.topic_policies, self.defaults)
        topic.settings.apply(resolved, topic.ledger)

    def _blank(self, name: str, namespace: NamespacePolicies) -> Policies:
        """What applies to a topic of the namespace that sets no policy of its own: resolved once
        per version of the namespace's policies (one object while they are unchanged), not for
        each of its topics at each load and each check."""
        kept = self._blanks.get(name)
        if kept is None or kept[0] is not namespace:
            kept = self._blanks[name] = (
                namespace,
                applied(_NONE_SET, namespace.topic_policies, self.defaults),
            )
        return kept[1]

    async def resolved(self, topic: str) -> Policies:
        """What applies to ``topic`` now, read afresh (for checks that must not lag an admin
        change by an interval: schema registrations)."""
        namespace = await self._namespaces.policies(topic.split("://", 1)[-1].rsplit("/", 1)[0])
        return applied(await self.store.get(topic), namespace.topic_policies, self.defaults)

    async def refresh(self, topic: Topic) -> None:
        """Apply the topic's policies again, topic-level ones read afresh (after an admin change)."""
        await self.loaded(topic, await self._namespaces.policies(topic.name.namespace_name))

    async def run(self, topics: LoadedTopics) -> None:
        """Every interval: each namespace's policies and topic-level policies read once, and
        applied to the loaded topics (changes made through another broker reach them so)."""
        while True:
            await asyncio.sleep(self._interval_s)
            known: dict[str, tuple[NamespacePolicies, dict[str, Policies]]] = {}
            for topic in topics.loaded():
                namespace = topic.name.namespace_name
                try:
                    if namespace not in known:
                        known[namespace] = (
                            await self._namespaces.policies(namespace),
                            await self.store.in_namespace(namespace),
                        )
                    policies, table = known[namespace]
                    topic.settings.own = own_policies(str(topic.name), table) if table else _NONE_SET
                    self.apply(topic, policies)
                except Exception as exc:  # the next round tries again
                    log.warning("policies of %s not refreshed: %s", topic.name, exc)
