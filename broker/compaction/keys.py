"""Which keys an entry's messages carry, and which of them delete their key (an empty payload or
``null_value``): what compaction decides by; and a batch cut down to the messages it keeps."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from magnetar.broker.protocol.frames import FrameError, payload_section, split_entry
from magnetar.proto import PulsarApi_pb2 as api


@dataclass(frozen=True)
class KeyedMessage:
    key: str | None  # None: the message has no key
    deletes: bool  # an empty value: the key goes


def messages_of(data: bytes) -> list[KeyedMessage] | None:
    """One per message of the entry (a batch's in order); None when they cannot be told apart
    (a compressed batch, or an entry that is not a message)."""
    try:
        metadata, payload = split_entry(data)
    except FrameError:
        return None
    if not metadata.HasField("num_messages_in_batch"):
        key = metadata.partition_key if metadata.HasField("partition_key") else None
        return [KeyedMessage(key, metadata.null_value or not payload)]
    if metadata.compression != api.NONE:
        return None
    return _batch(payload, metadata.num_messages_in_batch)


def _batch(payload: bytes, count: int) -> list[KeyedMessage] | None:
    found = []
    for single, _ in _singles(payload, count) or []:
        key = single.partition_key if single.HasField("partition_key") else None
        found.append(KeyedMessage(key, single.null_value or single.payload_size == 0))
    return found if len(found) == count else None


def _singles(payload: bytes, count: int) -> list[tuple[api.SingleMessageMetadata, bytes]] | None:
    """Each message of an uncompressed batch: its metadata, and its bytes as they stand in the
    batch (size, metadata, payload); None when the payload is not such a batch."""
    found = []
    offset = 0
    for _ in range(count):
        if offset + 4 > len(payload):
            return None
        (size,) = struct.unpack_from(">I", payload, offset)
        single = api.SingleMessageMetadata()
        try:
            single.ParseFromString(payload[offset + 4 : offset + 4 + size])
        except DecodeError:
            return None
        end = offset + 4 + size + single.payload_size
        if end > len(payload):
            return None
        found.append((single, payload[offset:end]))
        offset = end
    return found


def rebatch(data: bytes, keep: set[int]) -> bytes:
    """The uncompressed batch entry ``data`` with only the messages at ``keep`` (Pulsar's
    RawBatchConverter): what a compacted reader gets of a batch, so that acknowledging what it
    received acknowledges the entry."""
    metadata, payload = split_entry(data)
    singles = _singles(payload, metadata.num_messages_in_batch) or []
    body = b"".join(raw for index, (_, raw) in enumerate(singles) if index in keep)
    metadata.num_messages_in_batch = len(keep)
    if metadata.HasField("uncompressed_size"):
        metadata.uncompressed_size = len(body)
    return payload_section(metadata, body)
