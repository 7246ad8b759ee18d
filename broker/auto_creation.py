"""Auto topic creation (Pulsar's allowAutoTopicCreation, allowAutoTopicCreationType and
defaultNumPartitions, with a namespace's autoTopicCreation override): whether a topic nobody
created comes into being when a client first uses it, and as what.

Clients ask PARTITIONED_METADATA (or ``GET …/partitions?checkAllowAutoCreation=true`` over HTTP)
before anything else: when new topics are to be partitioned, that answer creates the partitioned
topic. When auto creation is off, a producer or consumer of a topic that was never created gets
TopicNotFound; topics created through the admin API are always taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from magnetar.broker.namespace import NamespaceError, NamespacePolicies
from magnetar.broker.partitions import PARTITION_SUFFIX, PartitionedTopics
from magnetar.broker.policies.data import AutoTopicCreationOverride
from magnetar.broker.topic import Topic, TopicName


class NamespacePolicySource(Protocol):
    async def policies(self, namespace: str) -> NamespacePolicies: ...


class LoadingTopics(Protocol):
    def get(self, name: str) -> Topic | None: ...

    async def get_or_load(self, name: str) -> Topic: ...

    async def topics_of_namespace(self, namespace: str, domains: Sequence[str] = ...) -> list[str]: ...


class AutoTopicCreation:
    def __init__(
        self,
        broker_default: AutoTopicCreationOverride,
        namespaces: NamespacePolicySource,
        partitioned: PartitionedTopics,
        topics: LoadingTopics,
    ) -> None:
        self._default = broker_default
        self._namespaces = namespaces
        self._partitioned = partitioned
        self._topics = topics

    async def rule(self, namespace: str) -> AutoTopicCreationOverride:
        override = (await self._namespaces.policies(namespace)).auto_topic_creation
        return override if override is not None else self._default

    async def _stored(self, name: TopicName) -> bool:
        return str(name) in await self._topics.topics_of_namespace(name.namespace_name, (name.domain,))

    async def partitions(self, topic: str) -> int:
        """The topic's partition count (0: not partitioned), creating it partitioned when it does
        not exist yet and new topics of its namespace are to be partitioned."""
        count = await self._partitioned.partitions(topic)
        name = TopicName.parse(topic)
        if count or PARTITION_SUFFIX in name.local:
            return count
        rule = await self.rule(name.namespace_name)
        if not rule.allowAutoTopicCreation or rule.topicType != "partitioned" or await self._stored(name):
            return 0
        try:
            await self._partitioned.create(str(name), rule.defaultNumPartitions or 1)
        except NamespaceError as exc:
            if exc.status != 409:  # created meanwhile by another client: that count stands
                raise
        return await self._partitioned.partitions(topic)

    async def get_or_load(self, name: str) -> Topic:
        """The topic for a producer or consumer; TopicNotFound (a 404 NamespaceError) for one that
        was never created while auto creation is off."""
        topic = self._topics.get(name)
        if topic is not None:
            return topic
        parsed = TopicName.parse(name)
        rule = await self.rule(parsed.namespace_name)
        if not rule.allowAutoTopicCreation and not await self._exists(parsed):
            raise NamespaceError(f"topic {parsed} does not exist and auto topic creation is off", 404)
        return await self._topics.get_or_load(name)

    async def _exists(self, name: TopicName) -> bool:
        base = name.local.rsplit(PARTITION_SUFFIX, 1)[0]
        if base != name.local:  # a partition exists when its partitioned topic has it
            index = name.local.rsplit(PARTITION_SUFFIX, 1)[1]
            count = await self._partitioned.partitions(f"{name.domain}://{name.namespace_name}/{base}")
            if index.isdigit() and int(index) < count:
                return True
        return await self._stored(name)
