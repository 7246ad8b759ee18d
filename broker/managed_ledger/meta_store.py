"""The managed ledger's metadata in the metadata store (Pulsar's ``MetaStore``): where it lives, the
list of a topic's ledgers and whether it was terminated, and where each cursor's state lives.

One node per managed ledger (``/managed-ledgers/<tenant>/<ns>/persistent/<topic>``), written
with compare-and-set so that a deposed owner's write fails instead of overwriting; one child node
per durable cursor.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

from magnetar.broker.managed_ledger.errors import ManagedLedgerError
from magnetar.broker.managed_ledger.position import Position
from magnetar.common.metadata import MetadataStore, NoNodeError

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


def decode(name: str, data: bytes) -> tuple[list[LedgerInfo], Position | None]:
    try:
        doc = json.loads(data) if data else {}
        ledgers = [LedgerInfo(**info) for info in doc.get("ledgers", [])]
        terminated = doc.get("terminated")
    except (ValueError, TypeError) as exc:
        raise ManagedLedgerError(f"metadata of managed ledger {name} is unreadable: {exc}") from exc
    return ledgers, Position(*terminated) if terminated else None


def encode(ledgers: list[LedgerInfo], terminated_at: Position | None) -> bytes:
    doc: dict[str, Any] = {"ledgers": [asdict(i) for i in ledgers]}
    if terminated_at is not None:
        doc["terminated"] = [terminated_at.ledger_id, terminated_at.entry_id]
    return json.dumps(doc).encode()


async def load(store: MetadataStore, name: str) -> LedgerList:
    try:
        data, stat = await store.get(ledger_path(name))
    except NoNodeError:
        return LedgerList([], None, -1)
    ledgers, terminated_at = decode(name, data)
    return LedgerList(ledgers, terminated_at, stat.version)


async def save(store: MetadataStore, name: str, listed: LedgerList) -> int:
    """Write ``listed`` if the node is still at its version; returns the new version (BadVersionError,
    NodeExistsError or NoNodeError when another writer changed it)."""
    data = encode(listed.ledgers, listed.terminated_at)
    stat = await store.put(ledger_path(name), data, expected_version=listed.version)
    return stat.version
