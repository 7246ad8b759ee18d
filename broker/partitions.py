"""Partitioned topics (Pulsar's ``/admin/partitioned-topics`` in the configuration store).

A partitioned topic is only metadata: its partition count. Each partition is an ordinary topic
named ``<topic>-partition-<i>``, placed in a bundle by the hash of that name like any other, so
the partitions of one topic spread over bundles and brokers. The clients route messages to the
partitions (round robin, by key hash, or their own router) and consume from each; the broker only
tells them how many there are (PARTITIONED_METADATA, and ``GET …/partitions`` over HTTP).
"""

from __future__ import annotations

import json

from magnetar.broker.namespace import NamespaceError
from magnetar.broker.topic import TopicName
from magnetar.common.metadata import MetadataStore, NodeExistsError, NoNodeError

ROOT = "/admin/partitioned-topics"
#: Pulsar's maxNumPartitionsPerPartitionedTopic is unlimited by default; a bound keeps a typo sane
MAX_PARTITIONS = 4096
PARTITION_SUFFIX = "-partition-"


def _path(name: TopicName) -> str:
    return f"{ROOT}/{name.tenant}/{name.namespace}/{name.domain}/{name.local}"


def partition_name(name: TopicName, index: int) -> str:
    return f"{name}{PARTITION_SUFFIX}{index}"


def _check_count(partitions: object) -> int:
    if (
        isinstance(partitions, bool)
        or not isinstance(partitions, int)
        or not 1 <= partitions <= MAX_PARTITIONS
    ):
        raise NamespaceError(
            f"the number of partitions must be an integer in 1..{MAX_PARTITIONS}, not {partitions!r}", 412
        )
    return partitions


class PartitionedTopics:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def partitions(self, topic: str) -> int:
        """The partition count of ``topic``; 0 for a topic that is not partitioned (and for a
        partition itself)."""
        name = TopicName.parse(topic)
        try:
            data, _ = await self._store.get(_path(name))
        except NoNodeError:
            return 0
        return int(json.loads(data)["partitions"])

    async def create(self, topic: str, partitions: object) -> None:
        name = TopicName.parse(topic)
        count = _check_count(partitions)
        if PARTITION_SUFFIX in name.local:
            raise NamespaceError(f"{name} is a partition: a partitioned topic cannot be named so", 412)
        try:
            await self._store.create(
                _path(name), json.dumps({"partitions": count}).encode(), make_parents=True
            )
        except NodeExistsError:
            raise NamespaceError(f"partitioned topic {name} already exists", 409) from None

    async def update(self, topic: str, partitions: object) -> None:
        """Add partitions (Pulsar never removes any: their messages would be orphaned)."""
        name = TopicName.parse(topic)
        count = _check_count(partitions)
        current = await self.partitions(topic)
        if current == 0:
            raise NamespaceError(f"partitioned topic {name} does not exist", 404)
        if count <= current:
            raise NamespaceError(
                f"{name} has {current} partitions: the count can only grow, not to {count}", 409
            )
        await self._store.put(_path(name), json.dumps({"partitions": count}).encode())

    async def delete(self, topic: str) -> None:
        name = TopicName.parse(topic)
        try:
            await self._store.delete(_path(name))
        except NoNodeError:
            raise NamespaceError(f"partitioned topic {name} does not exist", 404) from None

    async def list(self, namespace: str, domain: str = "persistent") -> list[str]:
        try:
            names = await self._store.children(f"{ROOT}/{namespace}/{domain}")
        except NoNodeError:
            return []
        return sorted(f"{domain}://{namespace}/{n}" for n in names)
