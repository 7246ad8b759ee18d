"""Where the registry keeps schemas: one metadata-store node per schema id
(``/schemas/<tenant>/<namespace>/<topic>``, the topic without partition or domain, as Pulsar's
schema id) holding every version, written by compare-and-set so that two brokers registering at
once both land, one after the other. A deletion is a version of its own, marked deleted: versions
never go back, and what came before a deletion no longer counts."""

from __future__ import annotations

import base64
import contextlib
import json
import time
from dataclasses import dataclass

from magnetar.broker.schemas.schema_data import SchemaData
from magnetar.common.metadata import MetadataStore, NoNodeError

ROOT = "/schemas"


@dataclass(frozen=True)
class StoredSchema:
    version: int
    schema: SchemaData
    timestamp_ms: int
    deleted: bool = False


@dataclass(frozen=True)
class History:
    """Every version of a schema id, oldest first, with the node version it was read at."""

    versions: list[StoredSchema]
    node_version: int  # -1: no node yet

    def live(self) -> list[StoredSchema]:
        """The versions since the last deletion."""
        last_deleted = max((i for i, s in enumerate(self.versions) if s.deleted), default=-1)
        return self.versions[last_deleted + 1 :]

    def next_version(self) -> int:
        return self.versions[-1].version + 1 if self.versions else 0


def path(schema_id: str) -> str:
    return f"{ROOT}/{schema_id}"


class SchemaStorage:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def history(self, schema_id: str) -> History:
        try:
            data, stat = await self._store.get(path(schema_id))
        except NoNodeError:
            return History([], -1)
        return History([_decode(v) for v in json.loads(data)["versions"]], stat.version)

    async def append(self, schema_id: str, history: History, schema: SchemaData, *, deleted: bool) -> int:
        """Add a version after ``history``; BadVersionError (NodeExistsError for the first) when
        another broker added one since it was read."""
        version = StoredSchema(history.next_version(), schema, int(time.time() * 1000), deleted)
        doc = {"versions": [_encode(v) for v in [*history.versions, version]]}
        await self._store.put(
            path(schema_id), json.dumps(doc).encode(), expected_version=history.node_version
        )
        return version.version

    async def remove(self, schema_id: str) -> None:
        """Every version, for good (the topic was deleted)."""
        with contextlib.suppress(NoNodeError):
            await self._store.delete(path(schema_id))


def _encode(stored: StoredSchema) -> dict[str, object]:
    return {
        "version": stored.version,
        "type": stored.schema.type,
        "data": base64.b64encode(stored.schema.data).decode(),
        "properties": stored.schema.properties,
        "timestamp": stored.timestamp_ms,
        "deleted": stored.deleted,
    }


def _decode(doc: dict[str, object]) -> StoredSchema:
    properties = doc.get("properties") or {}
    assert isinstance(properties, dict)
    schema = SchemaData(str(doc["type"]), base64.b64decode(str(doc["data"])), dict(properties))
    return StoredSchema(int(str(doc["version"])), schema, int(str(doc["timestamp"])), bool(doc["deleted"]))
