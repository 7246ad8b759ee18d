"""AddRequests assembled from entries serialized once.

An entry goes to Qw bookies, and each bookie's stream sends it inside an ``AddRequest`` of its
own. Built as protobuf objects, every entry was copied into each request and serialized again
for each bookie, which cost a broker more CPU per message than anything else on its publish path.
Here an entry is serialized once (``EncodedEntry``) and a request's bytes are put together from
those, as the wire format defines a repeated message field and a map (protobuf parses them back
to the request it would have built: tests/bookie/client/test_add_request.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from magnetar.proto import bookie_pb2 as pb

#: field keys of AddRequest (proto/bookie.proto): entries = 1 and master_keys = 3 are
#: length-delimited (wire type 2), recovery = 2 a varint (wire type 0)
_ENTRIES = b"\x0a"
_RECOVERY_TRUE = b"\x10\x01"
_MASTER_KEY = b"\x1a"
#: inside a map entry: key = 1 (varint), value = 2 (bytes)
_MAP_KEY = b"\x08"
_MAP_VALUE = b"\x12"

_UINT64 = (1 << 64) - 1
_ONE_BYTE = tuple(bytes((value,)) for value in range(0x80))


class EncodedEntry(NamedTuple):
    ledger_id: int
    entry_id: int
    #: the serialized ``Entry``
    data: bytes

    @classmethod
    def of(cls, entry: pb.Entry) -> EncodedEntry:
        return cls(entry.ledger_id, entry.entry_id, entry.SerializeToString())


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint; a negative int64 as its 64-bit two's complement."""
    if 0 <= value < 0x4000:  # lengths and ids of a young ledger: one or two bytes, the usual case
        return _ONE_BYTE[value] if value < 0x80 else bytes(((value & 0x7F) | 0x80, value >> 7))
    value &= _UINT64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode(entries: Sequence[bytes], recovery: bool, master_keys: Mapping[int, bytes]) -> bytes:
    """The serialized ``AddRequest`` of these serialized entries."""
    parts: list[bytes] = []
    for data in entries:
        parts += (_ENTRIES, varint(len(data)), data)
    if recovery:
        parts.append(_RECOVERY_TRUE)
    for ledger_id, key in master_keys.items():
        item = b"".join((_MAP_KEY, varint(ledger_id), _MAP_VALUE, varint(len(key)), key))
        parts += (_MASTER_KEY, varint(len(item)), item)
    return b"".join(parts)
