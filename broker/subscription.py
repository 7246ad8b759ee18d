"""A subscription: a cursor on the topic's managed ledger, its consumers and their dispatcher."""

from __future__ import annotations

import logging
from typing import Protocol

from magnetar.broker.consumer import Consumer, SubType
from magnetar.broker.dispatcher import HASH_RANGE, Dispatcher
from magnetar.broker.managed_ledger import Entry, ManagedCursor, Position
from magnetar.broker.markers import MarkerIndex, SnapshotCache

log = logging.getLogger(__name__)


class SubscriptionBusyError(Exception):
    """The subscription cannot take this consumer (Exclusive taken, another type in use)."""


class ConsumerAssignError(Exception):
    """Key_Shared hash ranges that cannot be given (overlapping, invalid, mixed modes)."""


class SubscriptionListener(Protocol):
    """The topic's side of replicated subscriptions (PIP-33)."""

    def marker_read(self, subscription: Subscription, data: bytes, marker_type: int) -> None: ...

    async def advanced(self, subscription: Subscription) -> None: ...

    def consumers_left(self, subscription: Subscription) -> None: ...


class Subscription:
    def __init__(
        self,
        name: str,
        cursor: ManagedCursor,
        sub_type: int,
        *,
        replicated: bool = False,
        markers: MarkerIndex | None = None,
        listener: SubscriptionListener | None = None,
    ) -> None:
        self.name = name
        self.cursor = cursor
        self.sub_type = sub_type
        #: PIP-33: the mark-delete position is kept in step with the other clusters
        self.replicated = replicated
        self.dispatcher = Dispatcher(cursor, sub_type)
        self.dispatcher.on_markers = self._markers_read
        #: the topic's marker entries, left out of the backlog users see
        self.markers = markers
        self.listener = listener
        #: PIP-33 snapshots read by this subscription (size set by the topic's controller)
        self.snapshots = SnapshotCache(10)

    @property
    def consumers(self) -> list[Consumer]:
        return self.dispatcher.consumers

    @property
    def durable(self) -> bool:
        return self.cursor.durable

    def add_consumer(self, consumer: Consumer) -> None:
        if self.consumers and consumer.sub_type != self.sub_type:
            raise SubscriptionBusyError(
                f"subscription {self.name} is {SubType.Name(self.sub_type)}; "
                f"a {SubType.Name(consumer.sub_type)} consumer cannot join it"
            )
        if self.consumers and self.sub_type == SubType.Exclusive:
            raise SubscriptionBusyError(f"exclusive subscription {self.name} already has a consumer")
        if consumer.sub_type == SubType.Key_Shared:
            self._check_sticky_ranges(consumer)
        if not self.consumers and consumer.sub_type != self.sub_type:
            # A subscription with no consumer takes the type of the next one (as Pulsar does).
            self.sub_type = consumer.sub_type
            self.dispatcher.sub_type = consumer.sub_type
        self.dispatcher.add_consumer(consumer)

    def _check_sticky_ranges(self, consumer: Consumer) -> None:
        sticky = bool(consumer.sticky_ranges)
        if any(bool(c.sticky_ranges) != sticky for c in self.consumers):
            raise ConsumerAssignError(
                f"subscription {self.name} has Key_Shared consumers of the other mode (AUTO_SPLIT/STICKY)"
            )
        taken = [r for c in self.consumers for r in c.sticky_ranges]
        for start, end in consumer.sticky_ranges:
            if not 0 <= start <= end < HASH_RANGE:
                raise ConsumerAssignError(f"invalid hash range [{start}, {end}]: within 0..{HASH_RANGE - 1}")
            for other_start, other_end in taken:
                if start <= other_end and other_start <= end:
                    raise ConsumerAssignError(
                        f"hash range [{start}, {end}] overlaps [{other_start}, {other_end}], already taken"
                    )
            taken.append((start, end))

    def remove_consumer(self, consumer: Consumer) -> None:
        self.dispatcher.remove_consumer(consumer)
        if self.replicated and not self.consumers and self.listener is not None:
            self.listener.consumers_left(self)

    def acknowledge_batch_indexes(self, position: Position, ack_set: list[int]) -> bool:
        """Record a partial ack of a batch entry; True when it leaves nothing unacknowledged."""
        return self.dispatcher.acknowledge_batch_indexes(position, ack_set)

    async def acknowledge(self, positions: list[Position]) -> None:
        await self.cursor.delete(positions)
        self.dispatcher.acknowledged(positions)
        await self._advanced()

    async def acknowledge_cumulative(self, position: Position) -> None:
        await self.cursor.mark_delete(position)
        self.dispatcher.acknowledged([], cumulative_up_to=position)
        await self._advanced()

    async def _advanced(self) -> None:
        if self.replicated and self.listener is not None:
            try:
                await self.listener.advanced(self)
            except Exception as exc:  # the next acknowledgement tries again
                log.warning("subscription %s: update of the other clusters failed: %s", self.name, exc)

    async def _markers_read(self, entries: list[tuple[Entry, int]]) -> None:
        """Marker entries the dispatcher read: never for consumers; acknowledged at once."""
        if self.listener is not None:
            for entry, marker_type in entries:
                self.listener.marker_read(self, entry.data, marker_type)
        await self.acknowledge([entry.position for entry, _ in entries])

    async def seek(self, position: Position) -> None:
        """Reset the cursor; consumers are disconnected and reconnect to read from there.

        The consumers go first, so nothing is handed out while the reset is being persisted;
        what the dispatcher read meanwhile is dropped and the cursor rewound, so every entry
        from ``position`` on is read again."""
        for consumer in list(self.consumers):
            consumer.close_by_broker()
            self.dispatcher.remove_consumer(consumer)
        self.dispatcher.reset()
        await self.cursor.seek(position)
        self.dispatcher.reset()
        self.cursor.rewind()

    def pending(self, limit: int) -> list[Position]:
        """The first ``limit`` entries not acknowledged, in order, markers left out (what
        Pulsar's peek-messages and skip count)."""
        ledger = self.cursor.ledger
        markers = set(self.markers.positions) if self.markers is not None else set()
        found: list[Position] = []
        position = ledger.next_position(self.cursor.mark_delete_position)
        while len(found) < limit and ledger.has_entry(position):
            if not self.cursor.is_acknowledged(position) and position not in markers:
                found.append(position)
            position = ledger.next_position(position)
        return found

    async def skip(self, count: int) -> None:
        """Acknowledge the first ``count`` pending entries (all of them when fewer are left);
        consumers that were given them have their acknowledgements ignored."""
        skipped = self.pending(count)
        if skipped:
            await self.acknowledge_cumulative(skipped[-1])

    @property
    def backlog(self) -> int:
        """Entries not acknowledged, markers left out (they are no messages of the user's)."""
        backlog = self.cursor.number_of_entries_in_backlog
        if self.markers is not None and self.markers.positions:
            backlog -= self.markers.pending(self.cursor.mark_delete_position, self.cursor.is_acknowledged)
        return max(0, backlog)

    async def close(self) -> None:
        await self.dispatcher.close()
        # A closed subscription tells no one: letting go of its listener (the topic) and of the
        # dispatcher's hook into it leaves no reference cycle, so a closed topic is freed at once.
        self.listener = None
        self.dispatcher.on_markers = None
        await self.cursor.flush()
