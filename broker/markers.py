"""PIP-33's markers: messages stored inline in a topic, flagged by ``MessageMetadata.marker_type``,
never dispatched to consumers and never counted in user-facing backlogs or rates.

The types a topic and its subscriptions keep (the index of marker positions, each replicated
subscription's snapshot cache) live here, below the topic; the controller that writes and reads
the markers is broker/replication/replicated_subscriptions.py, above it, and the topic sees it
only as a ``topic.MarkerListener``.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass

from magnetar.broker.managed_ledger import Position
from magnetar.broker.protocol.frames import payload_section
from magnetar.proto import PulsarApi_pb2 as api
from magnetar.proto import PulsarMarkers_pb2 as markers

REQUEST = markers.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST
RESPONSE = markers.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE
SNAPSHOT = markers.REPLICATED_SUBSCRIPTION_SNAPSHOT
UPDATE = markers.REPLICATED_SUBSCRIPTION_UPDATE
#: producer name of markers (the remote deduplicates them by origin cluster and this name)
MARKER_PRODUCER = "pulsar.marker"
#: cursor property that remembers a subscription is replicated (across restarts)
REPLICATED_PROPERTY = "pulsar.replicated.subscription"

_last_sequence = 0


def _sequence_id() -> int:
    """Increasing marker sequence ids, also across broker restarts and owners (microseconds)."""
    global _last_sequence
    _last_sequence = max(_last_sequence + 1, time.time_ns() // 1000)
    return _last_sequence


def marker_entry(
    marker_type: int, body: bytes, replicate_to: list[str] | None = None
) -> tuple[bytes, api.MessageMetadata]:
    metadata = api.MessageMetadata(
        producer_name=MARKER_PRODUCER,
        sequence_id=_sequence_id(),
        publish_time=time.time_ns() // 1_000_000,
        marker_type=marker_type,
    )
    if replicate_to:
        metadata.replicate_to.extend(replicate_to)
    return payload_section(metadata, body), metadata


def marker_payload(data: bytes) -> bytes:
    """The payload (marker body) of a stored marker entry."""
    start = 6 if data[:2] == b"\x0e\x01" else 0
    size = int.from_bytes(data[start : start + 4], "big")
    return data[start + 4 + size :]


class MarkerIndex:
    """Positions of the marker entries a topic holds (since it was loaded), so user-facing
    backlogs leave them out."""

    def __init__(self) -> None:
        self.positions: list[Position] = []
        self.count = 0

    def add(self, position: Position) -> None:
        self.count += 1
        if not self.positions or position > self.positions[-1]:
            self.positions.append(position)
        else:
            bisect.insort(self.positions, position)

    def pending(self, mark_delete: Position, acknowledged: Callable[[Position], bool]) -> int:
        """Markers after ``mark_delete`` not acknowledged."""
        start = bisect.bisect_right(self.positions, mark_delete)
        return sum(1 for p in self.positions[start:] if not acknowledged(p))

    def forget_through(self, position: Position) -> None:
        del self.positions[: bisect.bisect_right(self.positions, position)]


@dataclass
class Snapshot:
    position: Position  # local: the subscription may tell the others once past it
    clusters: dict[str, Position]
    #: when the subscription read it (monotonic), for the wait until its update (stats)
    cached_at: float = 0.0


class SnapshotCache:
    """A replicated subscription's snapshots, in topic order."""

    def __init__(self, size: int) -> None:
        #: a list, not a deque: every subscription has one, at most ``size`` long (56 bytes empty, not 760)
        self.snapshots: list[Snapshot] = []
        self.size = size
        #: the newest snapshot passed, and when an update last went out ((a) repeats it)
        self.last: Snapshot | None = None
        self.last_update = 0.0
        #: (a): acknowledgements since the last update that no update has named yet
        self.dirty = False

    def add(self, snapshot: Snapshot) -> None:
        if self.snapshots and snapshot.position <= self.snapshots[-1].position:
            return  # read again after a rewind
        self.snapshots.append(snapshot)
        while len(self.snapshots) > self.size:
            self.snapshots.pop(0)

    def advanced(self, mark_delete: Position) -> Snapshot | None:
        """The newest snapshot at or before ``mark_delete`` (it and older ones are dropped)."""
        found = None
        while self.snapshots and self.snapshots[0].position <= mark_delete:
            found = self.snapshots.pop(0)
        return found
