"""Stored messages as the admin REST shows them (Pulsar's peek-messages, get-message-by-id and
examine-message): the payload as the body, the metadata in ``X-Pulsar-*`` headers.

The body is what the producer sent after the metadata, decompressed (a batch stays a batch: the
admin clients split it by the ``X-Pulsar-num-batch-message`` header, as they do with Pulsar's).
"""

from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime

from aiohttp import web

from magnetar.broker.managed_ledger import Entry, Position
from magnetar.broker.namespace import NamespaceError
from magnetar.broker.protocol.frames import FrameError, split_entry
from magnetar.proto import PulsarApi_pb2 as api


def message_id(position: Position, partition_index: int = -1) -> dict[str, int]:
    """Pulsar's MessageId as its admin REST writes it."""
    return {"ledgerId": position.ledger_id, "entryId": position.entry_id, "partitionIndex": partition_index}


def parse_message_id(body: object) -> tuple[int, int]:
    """(ledgerId, entryId) of a MessageId body; 400 for anything else."""
    if not isinstance(body, dict):
        raise NamespaceError(f"expected a message id object, not {type(body).__name__}", 400)
    ledger_id, entry_id = body.get("ledgerId"), body.get("entryId")
    if not isinstance(ledger_id, int) or not isinstance(entry_id, int) or isinstance(ledger_id, bool):
        raise NamespaceError(f"a message id needs integer ledgerId and entryId, not {body!r}", 400)
    return ledger_id, entry_id


def _decompressed(metadata: api.MessageMetadata, payload: bytes) -> bytes:
    if metadata.compression == api.NONE:
        return payload
    if metadata.compression == api.ZLIB:
        return zlib.decompress(payload)
    codec = api.CompressionType.Name(metadata.compression)
    raise NamespaceError(f"the message is compressed with {codec}, which this broker does not decode", 412)


def _header(value: str) -> str:
    """A client's string as a header value (a line break would end the header)."""
    return "".join(c if c.isprintable() else "?" for c in value)


def message_response(entry: Entry) -> web.Response:
    try:
        metadata, payload = split_entry(entry.data)
        body = _decompressed(metadata, payload)
    except (FrameError, zlib.error) as exc:
        raise NamespaceError(f"message {entry.position} cannot be decoded: {exc}", 500) from None
    published = datetime.fromtimestamp(metadata.publish_time / 1000, UTC)
    headers = {
        "X-Pulsar-Message-ID": f"{entry.position.ledger_id}:{entry.position.entry_id}",
        "X-Pulsar-publish-time": published.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "X-Pulsar-producer-name": _header(metadata.producer_name),
        "X-Pulsar-sequence-id": str(metadata.sequence_id),
        "X-Pulsar-Property": json.dumps({p.key: p.value for p in metadata.properties}),
    }
    if metadata.HasField("num_messages_in_batch"):
        headers["X-Pulsar-num-batch-message"] = str(metadata.num_messages_in_batch)
    if metadata.HasField("partition_key"):
        headers["X-Pulsar-partition-key"] = _header(metadata.partition_key)
    if metadata.HasField("event_time"):
        headers["X-Pulsar-event-time"] = str(metadata.event_time)
    return web.Response(body=body, headers=headers, content_type="application/octet-stream")
