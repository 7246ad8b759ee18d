"""What the registry means for a topic's clients (Pulsar's topic-level schema handling):

- a producer's schema is registered (or found) under the topic's strategy and its version given
  back; a producer without one is refused on a topic with a schema when
  ``schemaValidationEnforced``;
- a consumer's schema is registered when the topic is idle and has none (no producers, no
  consumers, nothing stored), else it must read what the topic's schemas wrote;
- GET_SCHEMA and GET_OR_CREATE_SCHEMA.

A topic's schema id is its name without domain and partition (partitions share one schema)."""

from __future__ import annotations

import re
from typing import Protocol

from magnetar.broker.policies.data import Policies
from magnetar.broker.schemas.compatibility import IncompatibleSchemaError
from magnetar.broker.schemas.registry import SchemaRegistry, decode_version, encode_version
from magnetar.broker.schemas.schema_data import SchemaData
from magnetar.broker.schemas.storage import StoredSchema
from magnetar.broker.topic import TopicName
from magnetar.proto import PulsarApi_pb2 as api

_PARTITION = re.compile(r"-partition-\d+$")
#: what a client sends that is no schema to register (bytes, or AUTO_CONSUME)
_NO_SCHEMA = (api.Schema.NoSchema, api.Schema.AutoConsume)


class PolicySource(Protocol):
    async def resolved(self, topic: str) -> Policies: ...


def schema_id(topic: str) -> str:
    """``tenant/namespace/topic`` of ``domain://tenant/namespace/topic[-partition-N]``;
    InvalidTopicNameError for a name that is not a topic's."""
    name = TopicName.parse(topic)
    return _PARTITION.sub("", f"{name.tenant}/{name.namespace}/{name.local}")


def _given(schema: api.Schema | None) -> SchemaData | None:
    if schema is None or (schema.type in _NO_SCHEMA and not schema.schema_data):
        return None
    return SchemaData.from_wire(schema)


class SchemaAdmission:
    def __init__(self, registry: SchemaRegistry, policies: PolicySource) -> None:
        self.registry = registry
        self._policies = policies

    async def strategy(self, topic: str) -> str:
        return (await self._policies.resolved(topic)).schemaCompatibilityStrategy or "BACKWARD"

    async def for_producer(self, topic: str, schema: api.Schema | None) -> bytes:
        """The schema version a producer writes with (b"" without a schema);
        IncompatibleSchemaError or InvalidSchemaError when it may not write."""
        given = _given(schema)
        policies = await self._policies.resolved(topic)
        if given is None:
            if policies.schemaValidationEnforced and await self.registry.latest(schema_id(topic)):
                raise IncompatibleSchemaError(
                    f"{topic} has a schema and enforces it (schemaValidationEnforced): "
                    "producers without a schema may not write to it"
                )
            return b""
        version = await self.registry.register(
            schema_id(topic),
            given,
            policies.schemaCompatibilityStrategy or "BACKWARD",
            auto_update=policies.isAllowAutoUpdateSchema is not False,
        )
        return encode_version(version)

    async def for_consumer(self, topic: str, schema: api.Schema | None, *, idle: bool) -> None:
        given = _given(schema)
        if given is None:
            return
        strategy = await self.strategy(topic)
        if idle and await self.registry.latest(schema_id(topic)) is None:
            await self.registry.register(schema_id(topic), given, strategy, auto_update=True)
        else:
            await self.registry.check_consumer(schema_id(topic), given, strategy)

    async def get(self, topic: str, version: bytes | None) -> tuple[StoredSchema | None, str]:
        """The schema of that version (the latest without one), or None and why not."""
        if version:
            try:
                number = decode_version(version)
            except ValueError as exc:
                return None, str(exc)
            found = await self.registry.version(schema_id(topic), number)
            return found, f"{topic} has no schema version {number}"
        return await self.registry.latest(schema_id(topic)), f"{topic} has no schema"
