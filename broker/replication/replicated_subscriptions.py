"""Replicated subscriptions (PIP-33): keep a subscription's mark-delete position in step across
the clusters of a replicated namespace, so a consumer failing over to another region resumes
about where it left off (duplicates within about one snapshot interval, nothing skipped).

Markers are messages stored inline in the topic, flagged by ``MessageMetadata.marker_type``
(field 20) with a ``PulsarMarkers.proto`` payload; they are never dispatched to consumers,
never batched, and not counted in the backlog or rates users see (``Topic.markers`` counts them
apart). Per topic with at least one replicated subscription and at least one remote cluster,
every ``replicated_subscriptions_snapshot_frequency_millis``:

1. the local cluster ``a`` writes a snapshot REQUEST (10) that the replicators carry to every
   remote cluster;
2. a remote ``b`` stores it at position X and answers with a RESPONSE (11) naming X, carried
   back to ``a`` only (``replicate_to``). Everything in ``b`` at or before X (b's own messages,
   and a's messages sent before the request) reaches ``a`` before that response does;
3. when every remote answered, ``a`` writes a SNAPSHOT (12), local only: "a's position of the
   last response <-> X in b". A snapshot not complete within
   ``replicated_subscriptions_snapshot_timeout_seconds`` (a region unreachable) is dropped:
   a partial snapshot could make a region skip messages it has not sent everywhere (PIP-33);
4. each replicated subscription caches the snapshots it reads (at most
   ``replicated_subscriptions_snapshot_max_cached_per_subscription``, the oldest dropped); when
   its mark-delete position passes a snapshot's local position, it writes an UPDATE (13) that
   every remote applies by moving that subscription's mark-delete to X (creating it if needed).

Beyond PIP-33 (a), behind ``replicated_subscriptions_carry_individual_acks`` (or the
namespace's ``replicated_subscriptions_carry_acks``): an update also names the messages the
subscription acknowledged past the snapshot point (by origin cluster and position there, the
identity that survives replication), and the remote acknowledges those
individually after moving its mark-delete. Without it, a consumer failing over gets again
everything acknowledged since the last snapshot it passed (about one snapshot interval, plus
messages acknowledged out of order past the mark-delete); with it, only what was acknowledged
since the last update. Updates then also go out every snapshot interval while the
subscription moves, not only when it passes a snapshot. Nothing unacknowledged is ever named,
so nothing is skipped.

Two clusters need one round. With three or more, a second round follows (PIP-33: a message of
``b`` may reach ``c`` before ``a``, and ``c``'s first answer would cover it): the snapshot
keeps the first round's remote positions and, as local position, the last answer of the
second round.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from magnetar.broker.deduplication import encode_position, source_position
from magnetar.broker.managed_ledger import Entry, InitialPosition, Position
from magnetar.broker.markers import (
    REQUEST,
    RESPONSE,
    SNAPSHOT,
    UPDATE,
    Snapshot,
    marker_entry,
    marker_payload,
)
from magnetar.broker.protocol.frames import FrameError, read_metadata
from magnetar.common.background import BackgroundTasks
from magnetar.proto import PulsarApi_pb2 as api
from magnetar.proto import PulsarMarkers_pb2 as markers

if TYPE_CHECKING:
    from magnetar.broker.subscription import Subscription
    from magnetar.broker.topic import Topic

log = logging.getLogger(__name__)

#: (a): entries read at most to name acknowledged messages, or to find named ones
_MAX_SCANNED = 20_000


def _identity(entry: Entry, local_cluster: str) -> tuple[str, int] | None:
    """(a): an entry's identity in every cluster: its origin cluster and its position there
    (encoded), from ``__MSG_PROP_REPL_SOURCE_POSITION`` for replicated entries; None when
    unreadable."""
    try:
        metadata = read_metadata(entry.data)
    except FrameError:
        return None
    if not metadata.HasField("replicated_from"):
        return local_cluster, encode_position(entry.position.ledger_id, entry.position.entry_id)
    position = source_position(metadata)
    return None if position is None else (metadata.replicated_from, position)


def _id(position: Position) -> markers.MarkersMessageIdData:
    return markers.MarkersMessageIdData(ledger_id=position.ledger_id, entry_id=position.entry_id)


def _position(message_id: markers.MarkersMessageIdData) -> Position:
    return Position(message_id.ledger_id, message_id.entry_id)


@dataclass
class _Pending:
    started: float
    #: the topic's user messages when it started
    received: int
    responses: dict[str, Position] = field(default_factory=dict)
    last_response: Position | None = None
    #: three or more clusters: the first round's answers (the snapshot's remote positions)
    first_round: dict[str, Position] | None = None


class ReplicatedSubscriptionsController:
    """One topic's snapshots and updates."""

    def __init__(
        self,
        topic: Topic,
        local_cluster: str,
        remote_clusters: Callable[[], set[str]],
        *,
        frequency_ms: Callable[[], int],
        timeout_s: float,
        cache_size: int,
        carry_acks: Callable[[], bool] = lambda: False,
        resume_without_removed: Callable[[], bool] = lambda: True,
    ) -> None:
        self.topic = topic
        self.local_cluster = local_cluster
        self.remote_clusters = remote_clusters
        self.frequency_ms = frequency_ms
        self.timeout_s = timeout_s
        self.cache_size = cache_size
        self.carry_acks = carry_acks
        self.resume_without_removed = resume_without_removed
        self.pending: dict[str, _Pending] = {}
        self._remotes: set[str] = set()
        #: the topic's user messages when the last completed snapshot started
        self._received_at_last_snapshot = -1
        self.snapshots_completed = 0
        self.snapshots_timed_out = 0
        # Where a failover's duplicates come from: a snapshot's request-to-SNAPSHOT time and a
        # subscription's wait from reading a snapshot to passing it (the UPDATE), recent ones.
        self.snapshot_ms: deque[float] = deque(maxlen=200)
        self.update_wait_ms: deque[float] = deque(maxlen=200)
        #: the snapshot loop, and marker work started from the topic's callbacks
        self._tasks = BackgroundTasks()

    def start(self) -> None:
        self._tasks.spawn(self._run(), name=f"replicated-subscriptions-{self.topic.name}")

    async def close(self) -> None:
        await self._tasks.cancel()

    # -- snapshots ------------------------------------------------------------------------------
    async def _run(self) -> None:
        # Fixed rate: a tick's own work (and a slow disk) does not stretch the cycle, since a
        # failover's duplicates grow with the age of the last snapshot; ticks missed while the
        # loop was busy are skipped, not made up in a burst.
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += self.frequency_ms() / 1000
            now = loop.time()
            if due < now:
                due = now
            await asyncio.sleep(due - now)
            await self._tick()

    async def _tick(self) -> None:
        now = time.monotonic()
        for snapshot_id, pending in list(self.pending.items()):
            if now - pending.started > self.timeout_s:
                del self.pending[snapshot_id]
                self.snapshots_timed_out += 1
                log.info("%s: snapshot %s timed out (a region did not answer)", self.topic.name, snapshot_id)
        remotes = self.remote_clusters()
        if remotes != self._remotes:
            # (b): a region removed from the namespace no longer holds snapshots back (and
            # one added is asked from the next snapshot on); off: the pending snapshot
            # waits for its timeout, as PIP-33 describes.
            if self._remotes - remotes and self.resume_without_removed():
                self.pending.clear()
            self._remotes = remotes
        replicated = [s for s in self.topic.subscriptions.values() if s.replicated]
        if not remotes or not replicated:
            return  # no markers on topics that have no use for them
        for subscription in replicated:
            if subscription.snapshots.dirty:
                try:
                    await self.advanced(subscription)
                except Exception as exc:
                    log.warning("%s: update of %s failed: %s", self.topic.name, subscription.name, exc)
        if not self._snapshot_due(now):
            return
        try:
            await self._start_snapshot()
        except Exception as exc:
            log.warning("%s: snapshot not started: %s", self.topic.name, exc)

    def _snapshot_due(self, now: float) -> bool:
        """A new snapshot only when user messages came since the last completed one (an idle
        topic gathers no markers), and none pending for more than two intervals: a region that does
        not answer gets no flood of requests while its snapshot waits for the timeout. A
        snapshot slower than one interval does not halve the rate."""
        if self._received() == self._received_at_last_snapshot:
            return False
        stalled = now - 2 * self.frequency_ms() / 1000
        return not any(p.started < stalled for p in self.pending.values())

    def _received(self) -> int:
        return self.topic.messages_in - self.topic.markers_in

    async def _start_snapshot(self) -> None:
        snapshot_id = str(uuid.uuid4())
        self.pending[snapshot_id] = _Pending(time.monotonic(), self._received())
        body = markers.ReplicatedSubscriptionsSnapshotRequest(
            snapshot_id=snapshot_id, source_cluster=self.local_cluster
        )
        await self._write(REQUEST, body.SerializeToString())

    async def _write(self, marker_type: int, body: bytes, replicate_to: list[str] | None = None) -> Position:
        data, metadata = marker_entry(marker_type, body, replicate_to)
        return await self.topic.publish(data, metadata)

    def marker_stored(self, metadata: api.MessageMetadata, data: bytes, position: Position) -> None:
        """A marker entry was stored in the topic (written here or by a remote's replicator)."""
        if not metadata.HasField("replicated_from") or metadata.replicated_from == self.local_cluster:
            return  # our own markers act when read (snapshots) or at the remote end
        self._tasks.spawn(self._remote_marker(metadata, data, position))

    async def _remote_marker(self, metadata: api.MessageMetadata, data: bytes, position: Position) -> None:
        body = marker_payload(data)
        try:
            if metadata.marker_type == REQUEST:
                request = markers.ReplicatedSubscriptionsSnapshotRequest.FromString(body)
                response = markers.ReplicatedSubscriptionsSnapshotResponse(
                    snapshot_id=request.snapshot_id,
                    cluster=markers.ClusterMessageId(cluster=self.local_cluster, message_id=_id(position)),
                )
                await self._write(RESPONSE, response.SerializeToString(), [request.source_cluster])
            elif metadata.marker_type == RESPONSE:
                await self._response(
                    markers.ReplicatedSubscriptionsSnapshotResponse.FromString(body), position
                )
            elif metadata.marker_type == UPDATE:
                await self._update(markers.ReplicatedSubscriptionsUpdate.FromString(body))
        except Exception as exc:
            log.warning(
                "%s: marker %d at %s not handled: %s", self.topic.name, metadata.marker_type, position, exc
            )

    async def _response(
        self, response: markers.ReplicatedSubscriptionsSnapshotResponse, position: Position
    ) -> None:
        pending = self.pending.get(response.snapshot_id)
        if pending is None:
            return  # timed out, or another owner's
        pending.responses[response.cluster.cluster] = _position(response.cluster.message_id)
        pending.last_response = position
        remotes = self.remote_clusters()
        if not remotes <= set(pending.responses):
            return
        if len(remotes) > 1 and pending.first_round is None:
            # PIP-33's second round: a message of one remote may have reached another remote
            # (and be inside its answer) before reaching here; once every remote answered a
            # second request, everything inside the first answers has arrived here too.
            pending.first_round, pending.responses = dict(pending.responses), {}
            request = markers.ReplicatedSubscriptionsSnapshotRequest(
                snapshot_id=response.snapshot_id, source_cluster=self.local_cluster
            )
            await self._write(REQUEST, request.SerializeToString())
            return
        del self.pending[response.snapshot_id]
        clusters = pending.first_round if pending.first_round is not None else pending.responses
        snapshot = markers.ReplicatedSubscriptionsSnapshot(
            snapshot_id=response.snapshot_id,
            local_message_id=_id(position),
            clusters=[
                markers.ClusterMessageId(cluster=c, message_id=_id(p)) for c, p in sorted(clusters.items())
            ],
        )
        await self._write(SNAPSHOT, snapshot.SerializeToString(), [self.local_cluster])
        self.snapshots_completed += 1
        self._received_at_last_snapshot = max(self._received_at_last_snapshot, pending.received)
        self.snapshot_ms.append((time.monotonic() - pending.started) * 1000)

    async def _update(self, update: markers.ReplicatedSubscriptionsUpdate) -> None:
        mine = next((c for c in update.clusters if c.cluster == self.local_cluster), None)
        if mine is None:
            return
        position = _position(mine.message_id)
        subscription = self.topic.subscriptions.get(update.subscription_name)
        if subscription is None:
            subscription = await self.topic.subscription(
                update.subscription_name,
                api.CommandSubscribe.Shared,
                InitialPosition.EARLIEST,
                replicated=True,
            )
        if position > subscription.cursor.mark_delete_position:
            await subscription.acknowledge_cumulative(position)
        if update.acknowledged:
            await self._acknowledge_named(subscription, position, update.acknowledged)

    async def _acknowledge_named(
        self, subscription: Subscription, after: Position, named: Sequence[markers.AcknowledgedEntries]
    ) -> None:
        """(a): acknowledge the entries after ``after`` that the update names."""
        wanted = {n.origin_cluster: [(r.first, r.last) for r in n.positions] for n in named}
        ledger = self.topic.ledger
        start = ledger.next_position(max(after, subscription.cursor.mark_delete_position))
        done: list[Position] = []
        # Read until every named message was found (or the cap): no further than needed.
        missing = sum(r.last - r.first + 1 for n in named for r in n.positions)
        scanned = 0
        while scanned < _MAX_SCANNED and missing > 0:
            entries = await ledger.read_entries(start, 500)
            if not entries:
                break
            for entry in entries:
                identity = _identity(entry, self.local_cluster)
                if identity is None:
                    continue
                origin, encoded = identity
                if any(a <= encoded <= b for a, b in wanted.get(origin, ())):
                    done.append(entry.position)
                    missing -= 1
            scanned += len(entries)
            start = ledger.next_position(entries[-1].position)
        if done:
            await subscription.acknowledge(done)

    # -- subscriptions --------------------------------------------------------------------------
    def consumers_left(self, subscription: Subscription) -> None:
        """(a): the subscription's last consumer left: what it acknowledged since the last update
        goes out now, not at the next tick, so a consumer moving to another region right away
        gets it as little as possible again."""
        if not (subscription.replicated and self.carry_acks() and subscription.snapshots.dirty):
            return
        self._tasks.spawn(self._update_now(subscription))

    async def _update_now(self, subscription: Subscription) -> None:
        try:
            await self.advanced(subscription, now_please=True)
        except Exception as exc:  # closing topic: the next owner's updates cover it
            log.info("%s: update of %s not sent: %s", self.topic.name, subscription.name, exc)

    def snapshot_read(self, subscription: Subscription, data: bytes) -> None:
        """A subscription's dispatcher read a SNAPSHOT marker: cache it."""
        if not subscription.replicated:
            return
        snapshot = markers.ReplicatedSubscriptionsSnapshot.FromString(marker_payload(data))
        subscription.snapshots.add(
            Snapshot(
                _position(snapshot.local_message_id),
                {c.cluster: _position(c.message_id) for c in snapshot.clusters},
                cached_at=time.monotonic(),
            )
        )

    async def advanced(self, subscription: Subscription, *, now_please: bool = False) -> None:
        """A replicated subscription's mark-delete moved: tell the others when past a snapshot
        (with (a), also every interval while acknowledgements come, and at once with
        ``now_please``: its last consumer left, likely to continue in another region)."""
        cache = subscription.snapshots
        snapshot = cache.advanced(subscription.cursor.mark_delete_position)
        carry = self.carry_acks()
        now = time.monotonic()
        due = now_please or now - cache.last_update >= self.frequency_ms() / 1000
        if snapshot is not None:
            cache.last = snapshot
            self.update_wait_ms.append((now - snapshot.cached_at) * 1000)
        elif carry and cache.last is not None and due:
            snapshot = cache.last  # (a): the same point, more acknowledged messages past it
        else:
            cache.dirty = carry and cache.last is not None  # (a): the next tick sends it
            return
        cache.dirty = False
        cache.last_update = now
        update = markers.ReplicatedSubscriptionsUpdate(
            subscription_name=subscription.name,
            clusters=[
                markers.ClusterMessageId(cluster=c, message_id=_id(p))
                for c, p in sorted(snapshot.clusters.items())
            ],
        )
        if carry:
            update.acknowledged.extend(await self._acknowledged_since(subscription, snapshot.position))
        await self._write(UPDATE, update.SerializeToString())

    async def _acknowledged_since(
        self, subscription: Subscription, position: Position
    ) -> list[markers.AcknowledgedEntries]:
        """(a): the entries acknowledged after ``position``, by origin cluster and position there."""
        cursor = subscription.cursor
        ledger = self.topic.ledger
        found: dict[str, list[tuple[int, int]]] = {}
        start = ledger.next_position(position)
        # Nothing past the last acknowledged position is acknowledged: read no further.
        ranges_acked = cursor.individually_deleted_ranges
        end = (
            max(cursor.mark_delete_position, ranges_acked[-1][1])
            if ranges_acked
            else cursor.mark_delete_position
        )
        scanned = 0
        while scanned < _MAX_SCANNED and start <= end:
            entries = await ledger.read_entries(start, 500)
            if not entries:
                break
            for entry in entries:
                if not cursor.is_acknowledged(entry.position):
                    continue
                identity = _identity(entry, self.local_cluster)
                if identity is not None:
                    origin, encoded = identity
                    ranges = found.setdefault(origin, [])
                    if ranges and ranges[-1][1] + 1 == encoded:
                        ranges[-1] = (ranges[-1][0], encoded)
                    else:
                        ranges.append((encoded, encoded))
            scanned += len(entries)
            start = ledger.next_position(entries[-1].position)
        return [
            markers.AcknowledgedEntries(
                origin_cluster=origin, positions=[markers.PositionRange(first=a, last=b) for a, b in ranges]
            )
            for origin, ranges in sorted(found.items())
        ]

    def stats(self) -> dict[str, object]:
        return {
            "snapshotsCompleted": self.snapshots_completed,
            "snapshotsTimedOut": self.snapshots_timed_out,
            "snapshotsPending": len(self.pending),
            "snapshotMillisP50": _median(self.snapshot_ms),
            "snapshotMillisMax": max(self.snapshot_ms, default=None),
            "updateWaitMillisP50": _median(self.update_wait_ms),
            "updateWaitMillisMax": max(self.update_wait_ms, default=None),
        }


def _median(values: deque[float]) -> float | None:
    return sorted(values)[len(values) // 2] if values else None


MarkerHandler = Callable[[api.MessageMetadata, bytes, Position], None]
AdvanceHandler = Callable[["Subscription"], Awaitable[None]]
