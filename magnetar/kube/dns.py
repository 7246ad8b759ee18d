"""One A-record question over UDP, enough to tell that CoreDNS answers for the cluster's names
(the standard library has no DNS client, and the node needs no other)."""

from __future__ import annotations

import random
import socket
import struct


def resolve_a(name: str, server: str, port: int = 53, timeout_s: float = 2.0) -> list[str]:
    """The IPv4 addresses ``server`` gives for ``name``; [] for NXDOMAIN or an empty answer."""
    query_id = random.randrange(1 << 16)
    question = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    packet = struct.pack(">HHHHHH", query_id, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout_s)
        sock.sendto(packet, (server, port))
        reply, _ = sock.recvfrom(4096)
    rid, flags, qd, an, _, _ = struct.unpack(">HHHHHH", reply[:12])
    if rid != query_id:
        raise OSError("DNS reply to another question")
    rcode = flags & 0xF
    if rcode not in (0, 3):
        raise OSError(f"DNS error code {rcode} from {server}")
    offset = 12
    for _ in range(qd):
        offset = _skip_name(reply, offset) + 4
    addresses = []
    for _ in range(an):
        offset = _skip_name(reply, offset)
        rtype, _, _, length = struct.unpack(">HHIH", reply[offset : offset + 10])
        offset += 10
        if rtype == 1 and length == 4:
            addresses.append(socket.inet_ntoa(reply[offset : offset + 4]))
        offset += length
    return addresses


def _skip_name(data: bytes, offset: int) -> int:
    while True:
        length = data[offset]
        if length == 0:
            return offset + 1
        if length & 0xC0 == 0xC0:  # a compression pointer ends the name
            return offset + 2
        offset += length + 1
