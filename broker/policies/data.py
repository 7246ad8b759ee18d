"""Topic policies in Pulsar's names and JSON shapes: what a namespace or a single topic sets, and
what applies to a topic: its own setting, else its namespace's, else the broker's default
(Pulsar's order).

Namespace-level settings are kept with the namespace's policies; topic-level ones in the
configuration store under ``/admin/topic-policies`` (Pulsar keeps those in a system topic, read
once per namespace into a cache).
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Literal
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, Field, field_validator

from magnetar.admin.schema_strategies import SchemaStrategy
from magnetar.common.metadata import BadVersionError, MetadataStore, NodeExistsError, NoNodeError
from magnetar.common.metadata.cache import ReadCache

ROOT = "/admin/topic-policies"
_PARTITION = re.compile(r"-partition-\d+$")
BacklogPolicy = Literal["producer_request_hold", "producer_exception", "consumer_backlog_eviction"]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RetentionPolicies(_Shape):
    """How long and how much consumed data is kept (-1: no limit of that kind)."""

    retentionTimeInMinutes: int = Field(ge=-1)
    retentionSizeInMB: int = Field(ge=-1)


class BacklogQuota(_Shape):
    """The ``destination_storage`` quota: a backlog over ``limitSize`` bytes (-1: no limit)."""

    limitSize: int = Field(default=-1, ge=-1)
    limitTime: int = Field(default=-1, ge=-1)
    policy: BacklogPolicy = "producer_request_hold"


class PublishRate(_Shape):
    """Messages and bytes a topic takes per second (-1 or 0: no limit)."""

    publishThrottlingRateInMsg: int = Field(default=-1, ge=-1)
    publishThrottlingRateInByte: int = Field(default=-1, ge=-1)


class DispatchRate(_Shape):
    """Messages and bytes a topic dispatches per period, all subscriptions together."""

    dispatchThrottlingRateInMsg: int = Field(default=-1, ge=-1)
    dispatchThrottlingRateInByte: int = Field(default=-1, ge=-1)
    ratePeriodInSecond: int = Field(default=1, ge=1)
    relativeToPublishRate: bool = False


class AutoTopicCreationOverride(BaseModel):
    """A namespace's override, in Pulsar's JSON shape."""

    model_config = ConfigDict(extra="forbid")

    allowAutoTopicCreation: bool
    topicType: Literal["non-partitioned", "partitioned"] = "non-partitioned"
    defaultNumPartitions: int | None = Field(default=None, ge=1)


class DelayedDeliveryPolicies(_Shape):
    """Whether messages with a delivery time are held back until it comes (``active``)."""

    active: bool
    tickTime: float = Field(default=1000, ge=0)
    maxDelayInMillis: int = Field(default=0, ge=0)


class Policies(BaseModel):
    """One level's settings; None: not set at this level."""

    model_config = ConfigDict(extra="ignore")

    retention: RetentionPolicies | None = None
    #: seconds after which unacknowledged messages are acknowledged for every subscription (0: never)
    messageTTL: int | None = Field(default=None, ge=0)
    backlogQuota: BacklogQuota | None = None
    #: producers / consumers a topic takes (0: no limit)
    maxProducers: int | None = Field(default=None, ge=0)
    maxConsumers: int | None = Field(default=None, ge=0)
    publishRate: PublishRate | None = None
    dispatchRate: DispatchRate | None = None
    delayedDelivery: DelayedDeliveryPolicies | None = None
    #: schema registry: which schemas may follow (UNDEFINED: not set at this level), whether
    #: clients may register new ones, whether a producer without a schema is refused on a topic
    #: that has one
    schemaCompatibilityStrategy: SchemaStrategy | None = None
    isAllowAutoUpdateSchema: bool | None = None
    schemaValidationEnforced: bool | None = None
    #: bytes after the last compaction's horizon at which a topic is compacted (0: never)
    compactionThreshold: int | None = Field(default=None, ge=0)

    @field_validator("schemaCompatibilityStrategy", mode="before")
    @classmethod
    def _undefined_is_unset(cls, value: object) -> object:
        return None if value == "UNDEFINED" else value

    def over(self, lower: Policies) -> Policies:
        """These settings, with ``lower``'s where these are not set."""
        return Policies.model_validate(
            {
                name: getattr(self, name) if getattr(self, name) is not None else getattr(lower, name)
                for name in Policies.model_fields
            }
        )


def applied(topic: Policies, namespace: Policies, defaults: Policies) -> Policies:
    return topic.over(namespace).over(defaults)


def own_policies(topic: str, table: dict[str, Policies]) -> Policies:
    """A topic's own policies from ``in_namespace``'s table (a partition's over its topic's)."""
    own = table.get(topic, Policies())
    base = _PARTITION.sub("", topic)
    return own if base == topic else own.over(table.get(base, Policies()))


class TopicPolicyStore:
    """Topic-level policies in the configuration store.

    Most topics set none, and a topic's policies are read at each load (and at each producer's
    schema check): a round trip per topic, twice, when a bundle of a thousand topics moves. The
    names of the topics that set some are read once per namespace and kept until a child is
    added or removed (a watch on the namespace's node, as Pulsar's topic-policies cache is kept
    per namespace), so a topic without policies costs no round trip; one with policies is read
    afresh each time (a change of a node's data does not change its parent's children)."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._listed = ReadCache(store)
        #: each listed folder's names as a set, with the list it was made from
        self._name_sets: dict[str, tuple[list[str], frozenset[str]]] = {}

    @staticmethod
    def _path(topic: str) -> str:
        domain, rest = topic.split("://", 1)
        tenant, namespace, local = rest.split("/", 2)
        return f"{ROOT}/{tenant}/{namespace}/{domain}/{quote(local, safe='')}"

    async def get(self, topic: str) -> Policies:
        """The topic's own policies; a partition's are its own over its partitioned topic's."""
        own = await self._get(topic)
        base = _PARTITION.sub("", topic)
        return own if base == topic else own.over(await self._get(base))

    async def _get(self, topic: str) -> Policies:
        path = self._path(topic)
        if not await self._listed_here(path):
            return Policies()
        try:
            data, _ = await self._store.get(path)
        except NoNodeError:
            return Policies()
        return Policies.model_validate_json(data)

    async def _listed_here(self, path: str) -> bool:
        """Whether ``path`` is among its folder's children (as last listed)."""
        folder, name = path.rsplit("/", 1)
        try:
            names = await self._listed.children(folder)
        except NoNodeError:
            return False
        kept = self._name_sets.get(folder)
        if kept is None or kept[0] is not names:
            kept = self._name_sets[folder] = (names, frozenset(names))
        return name in kept[1]

    def _written(self, path: str) -> None:
        """This process added or removed ``path``: its folder's listing is read again."""
        folder = path.rsplit("/", 1)[0]
        self._listed.drop(folder)
        self._name_sets.pop(folder, None)

    async def in_namespace(self, namespace: str) -> dict[str, Policies]:
        """Every topic-level policy set in ``namespace`` (persistent topics), by topic name."""
        path = f"{ROOT}/{namespace}/persistent"
        try:
            names = await self._store.children(path)
        except NoNodeError:
            return {}
        found: dict[str, Policies] = {}
        for name in names:
            with contextlib.suppress(NoNodeError):
                data, _ = await self._store.get(f"{path}/{name}")
                found[f"persistent://{namespace}/{unquote(name)}"] = Policies.model_validate_json(data)
        return found

    async def update(self, topic: str, change: dict[str, object]) -> Policies:
        """Apply ``change`` by compare-and-set (concurrent admins both land)."""
        path = self._path(topic)
        while True:
            try:
                data, stat = await self._store.get(path)
                current, version = json.loads(data), stat.version
            except NoNodeError:
                current, version = {}, None
            updated = Policies.model_validate({**current, **change})
            encoded = updated.model_dump_json(exclude_none=True).encode()
            try:
                if version is None:
                    await self._store.create(path, encoded, make_parents=True)
                    self._written(path)
                else:
                    await self._store.put(path, encoded, expected_version=version)
                return updated
            except (BadVersionError, NodeExistsError):
                continue

    async def delete_namespace(self, namespace: str) -> None:
        with contextlib.suppress(NoNodeError):
            await self._store.delete(f"{ROOT}/{namespace}", recursive=True)
        for domain in ("persistent", "non-persistent"):
            self._written(f"{ROOT}/{namespace}/{domain}/-")

    async def delete(self, topic: str) -> None:
        path = self._path(topic)
        with contextlib.suppress(NoNodeError):
            await self._store.delete(path)
        self._written(path)
