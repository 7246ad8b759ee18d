"""The managed ledger's metadata in the metadata store (Pulsar's ``MetaStore``): where it lives, the
list of a topic's ledgers, whether it was terminated and its properties (string pairs its user
keeps with it, as ManagedLedgerInfo's), and where each cursor's node lives (what it holds: cursor_ledger.py).

One node per managed ledger (``/managed-ledgers/<tenant>/<ns>/persistent/<topic>``), written
with compare-and-set so that a deposed owner's write fails instead of overwriting; one child node
per durable cursor.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from magnetar.broker.managed_ledger.errors import ManagedLedgerError
from magnetar.broker.managed_ledger.position import Position
from magnetar.common.metadata import (
    BadVersionError,
    MetadataError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
)

log = logging.getLogger(__name__)

ROOT = "/managed-ledgers"


@dataclass
class LedgerInfo:
    ledger_id: int
    entries: int = -1  # -1: still open (being written)
    size: int = 0
    timestamp_ms: int = 0  # when it was closed (retention counts from there)


@dataclass
class LedgerList:
    """What the managed ledger's node holds, with the version it was read at (-1: no node)."""

    ledgers: list[LedgerInfo]
    terminated_at: Position | None
    version: int
    properties: dict[str, str] = field(default_factory=dict)


def ledger_path(name: str) -> str:
    return f"{ROOT}/{name}"


def cursor_path(name: str, cursor: str) -> str:
    return f"{ROOT}/{name}/cursors/{quote(cursor, safe='')}"


def validate_name(name: str) -> str:
    """A managed-ledger name is a relative path such as ``tenant/ns/persistent/topic``."""
    parts = name.split("/") if isinstance(name, str) else [""]
    if not name or any(part in ("", ".", "..") for part in parts):
        raise ManagedLedgerError(
            f"invalid managed ledger name {name!r}: expected non-empty '/'-separated parts "
            "such as 'tenant/namespace/persistent/topic'"
        )
    return name


def decode(name: str, data: bytes, version: int = -1) -> LedgerList:
    try:
        doc = json.loads(data) if data else {}
        ledgers = [LedgerInfo(**info) for info in doc.get("ledgers", [])]
        terminated = doc.get("terminated")
        properties = {str(k): str(v) for k, v in doc.get("properties", {}).items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise ManagedLedgerError(f"metadata of managed ledger {name} is unreadable: {exc}") from exc
    return LedgerList(ledgers, Position(*terminated) if terminated else None, version, properties)


def encode(listed: LedgerList) -> bytes:
    doc: dict[str, Any] = {"ledgers": [asdict(i) for i in listed.ledgers]}
    if listed.terminated_at is not None:
        doc["terminated"] = [listed.terminated_at.ledger_id, listed.terminated_at.entry_id]
    if listed.properties:
        doc["properties"] = listed.properties
    return json.dumps(doc).encode()


async def load(store: MetadataStore, name: str) -> LedgerList:
    try:
        data, stat = await store.get(ledger_path(name))
    except NoNodeError:
        return LedgerList([], None, -1)
    return decode(name, data, stat.version)


async def cursor_names(store: MetadataStore, name: str) -> list[str]:
    try:
        return [unquote(n) for n in await store.children(f"{ledger_path(name)}/cursors")]
    except NoNodeError:
        return []


async def names(store: MetadataStore, prefix: str = "") -> list[str]:
    """Names of the managed ledgers under ``prefix`` (e.g. ``tenant/ns/persistent``), sorted."""
    prefix = prefix.strip("/")
    found: list[str] = []
    await _walk(store, f"{ROOT}/{prefix}".rstrip("/"), prefix, found)
    return sorted(found)


async def _walk(store: MetadataStore, path: str, name: str, found: list[str]) -> None:
    # a node is a managed ledger's when it holds a ledger list; others are folders of the name
    with contextlib.suppress(NoNodeError):
        data, _ = await store.get(path)
        if name and _is_ledger_list(data):
            found.append(name)
            return
        for child in await store.children(path):
            await _walk(store, f"{path}/{child}", f"{name}/{child}".lstrip("/"), found)


def _is_ledger_list(data: bytes) -> bool:
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    return isinstance(doc, dict) and "ledgers" in doc


async def delete(store: MetadataStore, name: str) -> None:
    """The managed ledger's node and its cursors' nodes."""
    with contextlib.suppress(NoNodeError):
        await store.delete(ledger_path(name), recursive=True)


class NodeWriter:
    """The one writer of a node, by compare-and-set at the version it last wrote.

    A write whose answer was lost (the connection to the store dropped while it was under way)
    may have been applied or not. If it was, the next write meets a version conflict although
    nobody else wrote: taking that for another broker's takeover made a broker fence its own
    topic after a ZooKeeper outage of 30 s. So on a conflict the node is read again: when it
    holds one of the writes whose answers were lost, that write had succeeded and this one is
    retried at its version. Any other content is another writer's (every writer's content
    differs: cursors record who wrote them), and the conflict stands.
    """

    def __init__(self, store: MetadataStore, path: str, version: int = -1) -> None:
        self._store = store
        self.path = path
        self.version = version
        #: writes since the last answered one whose outcome is unknown
        self._unsure: list[bytes] = []

    async def write(self, data: bytes) -> int:
        """Write ``data`` at the version last written; BadVersionError (or NoNodeError) when
        another writer changed the node, MetadataError when the store could not be reached."""
        try:
            version = await self._put(data, self.version)
        except (BadVersionError, NodeExistsError):  # NodeExists: a lost create had been applied
            if not self._unsure:
                raise
            current, stat = await self._store.get(self.path)
            if current not in self._unsure:
                raise
            log.info("%s: a write whose answer was lost had been applied", self.path)
            version = await self._put(data, stat.version)
        self._unsure.clear()
        self.version = version
        return version

    async def _put(self, data: bytes, version: int) -> int:
        try:
            stat = await self._store.put(self.path, data, expected_version=version)
        except (BadVersionError, NoNodeError, NodeExistsError):
            raise
        except MetadataError:
            self._unsure.append(data)
            raise
        return stat.version
