"""Dispatchers: which consumer of a subscription gets each entry, within its permits.

A subscription's dispatch runs in rounds: a wake (permits, acknowledgements, consumers coming or
going, a new entry in the log) starts a round as a task unless one is running, which then goes
round again; a round that finds nothing to send ends, and the dispatcher waits on a callback of
the log's next add, holding no task (an idle subscription costs no task, as Pulsar's dispatchers
hold none). A round reads from the cursor (or replays entries to redeliver), and hands each entry
to a consumer by the subscription type:

- Exclusive and Failover: the active consumer only (Failover: the first by priority, then name);
- Shared: round-robin among consumers with permits, of the highest priority level (0) that has
  any (the consumers' ``priority_level``);
- Key_Shared: the consumer owning the hash of the entry's key on a consistent-hash ring; an entry
  waits while another consumer still holds unacknowledged entries of the same hash (after a
  consumer joined or left and the hash changed hands), so a key is never delivered out of order
  across consumers (Pulsar's "draining hashes").

Shared subscriptions hold back messages published with a delivery time (``deliver_at_time``,
the client's ``deliver_after``/``deliver_at``) until it comes, as Pulsar's delayed delivery does;
the other types dispatch them at once, as in Pulsar. The delayed positions are kept in memory: after
a restart the cursor reads them again from its mark-delete position and they are held anew.

Permits count messages: a batch entry takes as many as it holds, so a read asks for about as many
entries as the permits cover (by the average batch size seen so far). Entries read but not taken
wait, in order, in a small buffer served before the next read (never read twice). Redeliveries
go first. Only
entries a consumer really had and gave back (close, redelivery request, failover switch) count as
redelivered (``redelivery_count``, which drives the client's dead-letter policy).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import heapq
import itertools
import logging
import math
import time
import zlib
from collections.abc import Awaitable, Callable

from magnetar.broker.consumer import Consumer, SubType
from magnetar.broker.managed_ledger import Entry, ManagedCursor, ManagedLedgerError, Position
from magnetar.broker.protocol.frames import FrameError, read_metadata
from magnetar.broker.rate_limiter import RateLimiter

log = logging.getLogger(__name__)

HASH_RANGE = 65536
#: points per consumer on the Key_Shared hash ring (more: a more even split)
VIRTUAL_POINTS = 16
#: entries read per round (Pulsar's dispatcherMaxReadBatchSize)
MAX_READ_BATCH = 100


class Dispatcher:
    #: one per subscription: slots keep each instance's ~30 attributes out of a dict
    __slots__ = (
        "_active",
        "_closed",
        "_delay_timer",
        "_delay_timer_at",
        "_delayed",
        "_holders",
        "_markers",
        "_messages_per_entry",
        "_on_change",
        "_ready",
        "_replay",
        "_ring",
        "_round_robin",
        "_slot_of",
        "_task",
        "_waiting_for_entries",
        "_woken",
        "at_most_once",
        "batch_acks",
        "bytes_out",
        "consumers",
        "cursor",
        "delayed_delivery",
        "limiter",
        "messages_out",
        "on_markers",
        "on_sent",
        "redelivery_counts",
        "sub_type",
    )

    def __init__(
        self, cursor: ManagedCursor, sub_type: int, on_change: Callable[[], None] | None = None
    ) -> None:
        self.cursor = cursor
        self.sub_type = sub_type
        self.consumers: list[Consumer] = []
        self.redelivery_counts: dict[Position, int] = {}
        self._replay: set[Position] = set()
        #: entries read, in order, that no consumer could take yet
        self._ready: list[Entry] = []
        #: a wake came since the running round last looked (it goes round again)
        self._woken = False
        #: the round running, if any
        self._task: asyncio.Task[None] | None = None
        #: waiting for the log's next add (one callback at a time)
        self._waiting_for_entries = False
        self._round_robin = 0
        self._active: Consumer | None = None
        self._on_change = on_change or (lambda: None)
        self._closed = False
        #: Key_Shared: hash slot of each pending entry, and who holds unacked entries per slot
        self._slot_of: dict[Position, int] = {}
        self._holders: dict[int, dict[int, int]] = {}
        #: Key_Shared ring (sorted points, consumer at each point), rebuilt when consumers change
        self._ring: tuple[list[int], list[Consumer]] | None = None
        #: moving average of messages per entry, to size reads to the permits
        self._messages_per_entry = 1.0
        #: batch entries partly acknowledged: the ack set (bits set = messages still unacknowledged),
        #: sent with the entry when it goes out again so the client skips what was acknowledged.
        #: Kept in memory: after a broker restart a partly acknowledged batch comes whole again.
        self.batch_acks: dict[Position, list[int]] = {}
        #: Shared: (deliver-at ms, position) of entries held back until their delivery time
        self._delayed: list[tuple[int, Position]] = []
        self._delay_timer: asyncio.TimerHandle | None = None
        self._delay_timer_at = 0
        #: messages and bytes dispatched (for rates that survive consumers)
        self.messages_out = 0
        self.bytes_out = 0
        #: marker entries read (PIP-33): never dispatched, handed to ``on_markers`` (which
        #: acknowledges them) with their marker type
        self._markers: list[tuple[Entry, int]] = []
        self.on_markers: Callable[[list[tuple[Entry, int]]], Awaitable[None]] | None = None
        #: the topic's dispatch rate limit (shared by its subscriptions), if any
        self.limiter: RateLimiter | None = None
        #: whether the topic's delayed-delivery policy holds messages back (Shared only)
        self.delayed_delivery: Callable[[], bool] = lambda: True
        #: non-persistent topics: an entry counts as acknowledged once sent, never redelivered;
        #: ``on_sent`` is told after each round's acknowledgements (the topic frees memory)
        self.at_most_once = False
        self.on_sent: Callable[[], None] = lambda: None

    # -- consumers ------------------------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self._ring = None
        if not self._update_active() and self.sub_type == SubType.Failover:
            consumer.set_active(consumer is self._active)  # the newcomer hears who is active
        self.wake()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self._ring = None
        self._give_back(consumer, list(consumer.pending))
        self._update_active()
        self.wake()

    def _update_active(self) -> bool:
        """Pick the active consumer of Exclusive/Failover; True when it changed."""
        if self.sub_type not in (SubType.Failover, SubType.Exclusive):
            return False
        ordered = sorted(self.consumers, key=lambda c: (c.priority, c.name))
        active = ordered[0] if ordered else None
        if active is not self._active:
            previous, self._active = self._active, active
            if previous is not None and not previous.closed:
                # Its unacknowledged entries go to the new active consumer, in order.
                self._give_back(previous, list(previous.pending))
            if self.sub_type == SubType.Failover:  # as Pulsar: Exclusive consumers are not told
                for consumer in self.consumers:
                    consumer.set_active(consumer is active)
            return True
        return False

    def add_permits(self, consumer: Consumer, permits: int) -> None:
        consumer.permits += permits
        self.wake()

    def wake(self) -> None:
        """Something changed: dispatch (a round starts unless one runs; it goes round again)."""
        self._woken = True
        if self._task is None and not self._closed and self.consumers:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"dispatch-{self.cursor.name}"
            )

    # -- acknowledgements and redelivery --------------------------------------------------------
    def acknowledged(self, positions: list[Position], *, cumulative_up_to: Position | None = None) -> None:
        for consumer in self.consumers:
            done = [p for p in positions if p in consumer.pending]
            if cumulative_up_to is not None:
                done += [p for p in consumer.pending if p <= cumulative_up_to]
            for position in done:
                consumer.pending.pop(position, None)
                self._release(position, consumer)
        for position in positions:
            self._replay.discard(position)
            self.redelivery_counts.pop(position, None)
            self.batch_acks.pop(position, None)
        if cumulative_up_to is not None:
            self._replay = {p for p in self._replay if p > cumulative_up_to}
            for table in (self.redelivery_counts, self.batch_acks):
                for position in [p for p in table if p <= cumulative_up_to]:
                    del table[position]
        self.wake()

    def acknowledge_batch_indexes(self, position: Position, ack_set: list[int]) -> bool:
        """Merge a partial batch ack; True when no message of the entry is left unacknowledged."""
        known = self.batch_acks.get(position)
        if known is not None:
            # A word missing on one side counts as all unacknowledged (-1: every bit set).
            ack_set = [a & b for a, b in itertools.zip_longest(known, ack_set, fillvalue=-1)]
        if not any(ack_set):
            self.batch_acks.pop(position, None)
            return True
        self.batch_acks[position] = ack_set
        return False

    def _hold(self, position: Position, slot: int, consumer: Consumer) -> None:
        self._slot_of[position] = slot
        holders = self._holders.setdefault(slot, {})
        holders[id(consumer)] = holders.get(id(consumer), 0) + 1

    def _release(self, position: Position, consumer: Consumer) -> None:
        slot = self._slot_of.pop(position, None)
        if slot is None:
            return
        holders = self._holders.get(slot, {})
        left = holders.get(id(consumer), 0) - 1
        if left > 0:
            holders[id(consumer)] = left
        else:
            holders.pop(id(consumer), None)
            if not holders:
                self._holders.pop(slot, None)

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """Send again what ``consumer`` has not acknowledged (all of it, or ``positions``)."""
        chosen = (
            list(consumer.pending) if positions is None else [p for p in positions if p in consumer.pending]
        )
        for position in chosen:
            consumer.permits += consumer.pending[position]
        self._give_back(consumer, chosen)
        self.wake()

    def _give_back(self, consumer: Consumer, positions: list[Position]) -> None:
        """Entries ``consumer`` had and did not acknowledge go out again, counted as redelivered."""
        for position in positions:
            consumer.pending.pop(position, None)
            self._release(position, consumer)
            self._replay.add(position)
            self.redelivery_counts[position] = self.redelivery_counts.get(position, 0) + 1

    def reset(self) -> None:
        """After a seek: nothing pending, nothing to replay."""
        self._replay.clear()
        self._ready.clear()
        self.redelivery_counts.clear()
        self.batch_acks.clear()
        self._delayed.clear()
        self._cancel_delay_timer()
        for consumer in self.consumers:
            consumer.pending.clear()
        self._slot_of.clear()
        self._holders.clear()

    # -- the rounds -----------------------------------------------------------------------------
    async def _run(self) -> None:
        """Rounds while wakes keep coming; then the task ends (the next wake starts another)."""
        try:
            while self._woken and not self._closed:
                self._woken = False
                try:
                    await self._dispatch_available()
                except ManagedLedgerError as exc:
                    log.warning("dispatch on %s paused: %s", self.cursor.name, exc)
                    await asyncio.sleep(1)
                    self._woken = True
                except Exception:
                    log.exception("dispatcher of %s failed; retrying", self.cursor.name)
                    await asyncio.sleep(1)
                    self._woken = True
        finally:
            self._task = None

    async def _dispatch_available(self) -> None:
        while self._has_room():
            replaying, buffered = bool(self._replay), bool(self._ready)
            if replaying:
                batch = sorted(self._replay)[:MAX_READ_BATCH]
                self._replay.difference_update(batch)
                entries = await self.cursor.replay(batch)
            elif buffered:
                entries = [e for e in self._ready if not self.cursor.is_acknowledged(e.position)]
                self._ready = []
            elif self._throttled():
                return
            else:
                entries = await self.cursor.read_entries(self._entries_to_read())
            if not entries:
                if replaying or buffered:
                    continue
                self._wait_for_entries()
                return
            deferred = self._send(entries)
            if self.limiter is not None or self.at_most_once:
                sent = [e for e in entries if e not in deferred]
                if self.limiter is not None:
                    self.limiter.consume(len(sent), sum(len(e.data) for e in sent))
                if self.at_most_once:
                    await self.cursor.delete([e.position for e in sent])
                    self.on_sent()
            if self._markers:
                await self._settle_markers()
            if deferred:
                if replaying:
                    self._replay.update(e.position for e in deferred)
                else:
                    self._ready = deferred + self._ready
                return

    def _send(self, entries: list[Entry]) -> list[Entry]:
        """Hand out ``entries``; returns those no consumer could take now."""
        deferred: list[Entry] = []
        for entry in entries:
            if deferred:  # keep order: once one waits, the rest wait behind it
                deferred.append(entry)
                continue
            messages, key, deliver_at, marker_type = _entry_info(entry)
            if marker_type:
                self._markers.append((entry, marker_type))
                continue
            if (
                deliver_at
                and self.sub_type == SubType.Shared
                and deliver_at > time.time() * 1000
                and self.delayed_delivery()
            ):
                self._hold_back(entry.position, deliver_at)
                continue
            slot = zlib.crc32(key) % HASH_RANGE
            consumer = self._choose(slot)
            if consumer is None:
                deferred.append(entry)
                continue
            self._messages_per_entry += (messages - self._messages_per_entry) / 16
            consumer.deliver(
                entry,
                messages,
                self.redelivery_counts.get(entry.position, 0),
                self.batch_acks.get(entry.position),
            )
            self.messages_out += messages
            self.bytes_out += len(entry.data)
            if self.at_most_once:
                consumer.pending.pop(entry.position, None)
            elif self.sub_type == SubType.Key_Shared:
                self._hold(entry.position, slot, consumer)
        self._on_change()
        return deferred

    async def _settle_markers(self) -> None:
        found, self._markers = self._markers, []
        if self.on_markers is not None:
            await self.on_markers(found)
        else:
            await self.cursor.delete([entry.position for entry, _ in found])

    # -- delayed delivery -----------------------------------------------------------------------
    def _hold_back(self, position: Position, deliver_at_ms: int) -> None:
        heapq.heappush(self._delayed, (deliver_at_ms, position))
        self._arm_delay_timer()

    def _arm_delay_timer(self) -> None:
        if not self._delayed:
            return
        due = self._delayed[0][0]
        if self._delay_timer is not None and self._delay_timer_at <= due:
            return
        self._cancel_delay_timer()
        delay_s = max(0.0, due / 1000 - time.time())
        self._delay_timer = asyncio.get_running_loop().call_later(delay_s, self._release_due)
        self._delay_timer_at = due

    def _cancel_delay_timer(self) -> None:
        if self._delay_timer is not None:
            self._delay_timer.cancel()
            self._delay_timer = None

    def _release_due(self) -> None:
        """Delivery time reached: the held entries go out with the next replay."""
        self._delay_timer = None
        now_ms = time.time() * 1000
        while self._delayed and self._delayed[0][0] <= now_ms:
            self._replay.add(heapq.heappop(self._delayed)[1])
        self._arm_delay_timer()
        self.wake()

    def _choose(self, slot: int) -> Consumer | None:
        if self.sub_type in (SubType.Exclusive, SubType.Failover):
            active = self._active
            return active if active is not None and active.permits > 0 else None
        if self.sub_type == SubType.Key_Shared:
            return self._key_owner(slot)
        candidates = [c for c in self.consumers if c.permits > 0]
        if not candidates:
            return None
        # Shared priority levels (0 highest): lower levels get entries only while every
        # consumer of a higher one is out of permits; round-robin within the level.
        level = min(c.priority for c in candidates)
        candidates = [c for c in candidates if c.priority == level]
        self._round_robin = (self._round_robin + 1) % len(candidates)
        return candidates[self._round_robin]

    def _key_owner(self, slot: int) -> Consumer | None:
        if not self.consumers:
            return None
        owner = self.sticky_owner(slot) if self.consumers[0].sticky_ranges else self.ring_owner(slot)
        if owner is None or owner.permits <= 0:
            return None
        holders = self._holders.get(slot, {})
        if any(holder != id(owner) for holder in holders):
            return None  # another consumer still drains this hash: wait for its acks
        return owner

    def sticky_owner(self, slot: int) -> Consumer | None:
        """STICKY mode: the consumer whose ranges hold ``slot`` (none: the entry waits for one)."""
        for consumer in self.consumers:
            if any(start <= slot <= end for start, end in consumer.sticky_ranges):
                return consumer
        return None

    def ring_owner(self, slot: int) -> Consumer:
        """Consistent hashing over the hash range: a joining consumer takes keys only from its
        neighbours' arcs and a leaving one gives its arcs to its successors, so every other key
        keeps its consumer (and its order)."""
        if self._ring is None:
            ordered = sorted(
                (zlib.crc32(f"{c.name}#{c.consumer_id}#{i}".encode()) % HASH_RANGE, n)
                for n, c in enumerate(self.consumers)
                for i in range(VIRTUAL_POINTS)
            )
            self._ring = ([p for p, _ in ordered], [self.consumers[n] for _, n in ordered])
        points, owners = self._ring
        index = bisect.bisect_left(points, slot)
        return owners[index if index < len(points) else 0]

    def _receivers(self) -> list[Consumer]:
        """The consumers entries can go to now: the active one of Exclusive/Failover, else all."""
        if self.sub_type in (SubType.Exclusive, SubType.Failover):
            return [self._active] if self._active is not None else []
        return self.consumers

    def free_permits(self) -> int:
        """Messages the consumers that can be given entries now have permits for."""
        return sum(max(0, c.permits) for c in self._receivers())

    def _has_room(self) -> bool:
        return any(c.permits > 0 for c in self._receivers())

    def _entries_to_read(self) -> int:
        """About as many entries as the permits cover (Pulsar's avgMessagesPerEntry estimate),
        and no more than the dispatch rate limit lets out in this window."""
        permits = self.free_permits()
        wanted = max(1, min(MAX_READ_BATCH, math.ceil(permits / max(1.0, self._messages_per_entry))))
        left = self.limiter.messages_left() if self.limiter is not None else None
        return wanted if left is None else max(1, min(wanted, left))

    def _throttled(self) -> bool:
        """True when the dispatch rate limit is used up for this window; the dispatcher is woken
        when the next one starts."""
        wait_s = self.limiter.wait_s() if self.limiter is not None else 0.0
        if wait_s > 0:
            asyncio.get_running_loop().call_later(wait_s, self.wake)
        return wait_s > 0

    def _wait_for_entries(self) -> None:
        if self._waiting_for_entries:
            return  # the callback of an earlier round still waits
        self._waiting_for_entries = True
        future = self.cursor.ledger.wait_for_new_entries()
        future.add_done_callback(self._new_entries)

    def _new_entries(self, _future: asyncio.Future[None]) -> None:
        self._waiting_for_entries = False
        self.wake()

    async def close(self) -> None:
        self._closed = True
        self._cancel_delay_timer()
        task = self._task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _entry_info(entry: Entry) -> tuple[int, bytes, int, int]:
    """Messages in the entry, its key (Key_Shared), its delivery time in ms (0: at once) and its
    marker type (0: a message for consumers)."""
    try:
        metadata = read_metadata(entry.data)
    except (FrameError, ValueError, IndexError):
        return 1, b"", 0, 0
    key = metadata.ordering_key or metadata.partition_key.encode()
    deliver_at = metadata.deliver_at_time if metadata.HasField("deliver_at_time") else 0
    marker_type = metadata.marker_type if metadata.HasField("marker_type") else 0
    return max(1, metadata.num_messages_in_batch), key, deliver_at, marker_type
