"""The schema registry's operations (Pulsar's SchemaRegistryService): register a schema under a
strategy (or find it already registered), check a consumer's schema, read versions, delete.

A version travels as Pulsar's LongSchemaVersion: 8 bytes, big-endian."""

from __future__ import annotations

import struct

from magnetar.broker.schemas.compatibility import IncompatibleSchemaError, check
from magnetar.broker.schemas.schema_data import SchemaData
from magnetar.broker.schemas.storage import SchemaStorage, StoredSchema
from magnetar.common.metadata import BadVersionError, NodeExistsError

#: registrations racing other brokers' are tried again this often before giving up
_ATTEMPTS = 10
#: strategies under which a consumer's schema need only read what the latest schema wrote
_CONSUMER_READS_LATEST = ("BACKWARD", "FORWARD", "FORWARD_TRANSITIVE", "FULL")


def encode_version(version: int) -> bytes:
    return struct.pack(">q", version)


def decode_version(data: bytes) -> int:
    if len(data) != 8:
        raise ValueError(f"a schema version is 8 bytes, not {len(data)}")
    return int(struct.unpack(">q", data)[0])


class SchemaRegistry:
    def __init__(self, storage: SchemaStorage) -> None:
        self._storage = storage

    async def latest(self, schema_id: str) -> StoredSchema | None:
        """The latest schema; None when there is none or it was deleted."""
        live = (await self._storage.history(schema_id)).live()
        return live[-1] if live else None

    async def version(self, schema_id: str, version: int) -> StoredSchema | None:
        history = await self._storage.history(schema_id)
        return next((s for s in history.versions if s.version == version and not s.deleted), None)

    async def live(self, schema_id: str) -> list[StoredSchema]:
        """Every version since the last deletion, oldest first."""
        return (await self._storage.history(schema_id)).live()

    async def register(self, schema_id: str, schema: SchemaData, strategy: str, *, auto_update: bool) -> int:
        """The version of ``schema``: an identical one already registered, else a new version if
        the strategy lets it follow (and ``auto_update`` allows new ones at all)."""
        schema.validate()
        for _ in range(_ATTEMPTS):
            history = await self._storage.history(schema_id)
            live = history.live()
            found = next((s for s in live if s.schema.same_as(schema)), None)
            if found is not None:
                return found.version
            if not auto_update:
                raise IncompatibleSchemaError("Schema not found and schema auto updating is disabled.")
            check(schema, [s.schema for s in live], strategy)
            try:
                return await self._storage.append(schema_id, history, schema, deleted=False)
            except (BadVersionError, NodeExistsError):
                continue  # another broker registered one meanwhile: check against it too
        raise IncompatibleSchemaError(f"schema of {schema_id} kept changing while registering")

    async def check(self, schema_id: str, schema: SchemaData, strategy: str) -> None:
        """Whether ``schema`` could be registered (the admin API's compatibility call)."""
        schema.validate()
        check(schema, [s.schema for s in await self.live(schema_id)], strategy)

    async def check_consumer(self, schema_id: str, schema: SchemaData, strategy: str) -> None:
        """A consumer's schema must read what the topic's schemas wrote."""
        schema.validate()
        live = [s.schema for s in await self.live(schema_id)]
        if not live:
            raise IncompatibleSchemaError("Topic does not have schema to check")
        if strategy in _CONSUMER_READS_LATEST:
            check(schema, live[-1:], "BACKWARD")
        else:
            check(schema, live, strategy)

    async def delete(self, schema_id: str) -> int | None:
        """Mark the schema deleted (a later one need not be compatible); its version, None when
        there was nothing to delete."""
        for _ in range(_ATTEMPTS):
            history = await self._storage.history(schema_id)
            live = history.live()
            if not live:
                return None
            try:
                return await self._storage.append(schema_id, history, live[-1].schema, deleted=True)
            except (BadVersionError, NodeExistsError):
                continue
        raise IncompatibleSchemaError(f"schema of {schema_id} kept changing while deleting")

    async def remove(self, schema_id: str) -> None:
        await self._storage.remove(schema_id)
