"""A persistent topic: producers append to its managed ledger, subscriptions read from it.

The entry stored is exactly what the producer sent after the SEND command (magic, checksum,
metadata, payload): batches stay batches and compressed payloads stay compressed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from magnetar.broker.consumer import Consumer
from magnetar.broker.deduplication import CURSOR_NAME as DEDUP_CURSOR
from magnetar.broker.deduplication import REPLICATED_CURSOR_NAME, Deduplication, Status, replicated_identity
from magnetar.broker.managed_ledger import Entry, InitialPosition, ManagedCursor, Position, TopicLedger
from magnetar.broker.managed_ledger.topic_ledger import AddCallback
from magnetar.broker.markers import REPLICATED_PROPERTY, SNAPSHOT, MarkerIndex
from magnetar.broker.policies.topic_settings import TopicSettings
from magnetar.broker.producer_access import ProducerAccess
from magnetar.broker.protocol.frames import FrameError, read_metadata
from magnetar.broker.subscription import Subscription, SubscriptionBusyError
from magnetar.common.background import BackgroundTasks
from magnetar.common.futures import settle
from magnetar.proto import PulsarApi_pb2 as api

log = logging.getLogger(__name__)

#: the topic domains, as lists of them (which topics a listing covers)
PERSISTENT: tuple[str, ...] = ("persistent",)
NON_PERSISTENT: tuple[str, ...] = ("non-persistent",)
_PARTITION = re.compile(r"-partition-(\d+)$")
_TOPIC = re.compile(r"^(persistent|non-persistent)://([^/]+)/([^/]+)/(.+)$")
#: cursors of the broker's own (deduplication, replicators, compaction), never subscriptions users see
_INTERNAL_CURSORS = ("pulsar.dedup", "pulsar.repl.", "__compaction")


class MarkerListener(Protocol):
    """The topic's replicated-subscriptions controller, as the topic sees it."""

    cache_size: int

    def marker_stored(self, metadata: api.MessageMetadata, data: bytes, position: Position) -> None: ...

    def snapshot_read(self, subscription: Subscription, data: bytes) -> None: ...

    async def advanced(self, subscription: Subscription, *, now_please: bool = False) -> None: ...

    def consumers_left(self, subscription: Subscription) -> None: ...

    def stats(self) -> dict[str, object]: ...

    async def close(self) -> None: ...


class InvalidTopicNameError(ValueError):
    pass


class TopicNotAllowedError(Exception):
    """The topic may not be used here (Pulsar's NotAllowedError): non-persistent topics disabled,
    or something only a persistent topic can do asked of a non-persistent one."""


@dataclass(frozen=True)
class TopicName:
    domain: str
    tenant: str
    namespace: str
    local: str

    @classmethod
    def parse(cls, name: str) -> TopicName:
        if not isinstance(name, str):  # protobuf hands over the bytes of a name that is not UTF-8
            raise InvalidTopicNameError(f"invalid topic name {name!r}: not valid UTF-8")
        if any(ord(c) < 0x20 for c in name):
            raise InvalidTopicNameError(f"invalid topic name {name!r}: control characters are not allowed")
        match = _TOPIC.match(name)
        if match is None or not all(match.groups()):
            raise InvalidTopicNameError(
                f"invalid topic name {name!r}: expected persistent://tenant/namespace/topic"
            )
        return cls(*match.groups())

    def __str__(self) -> str:
        return self._text

    @functools.cached_property
    def _text(self) -> str:
        # Made once: a topic's name is asked for on every lookup, bundle scan and client close.
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def managed_ledger_name(self) -> str:
        return f"{self.tenant}/{self.namespace}/{self.domain}/{self.local}"

    @property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    @property
    def is_persistent(self) -> bool:
        return self.domain == "persistent"

    @property
    def partition_index(self) -> int:
        """N for a partition ``…-partition-N`` of a partitioned topic, else -1."""
        match = _PARTITION.search(self.local)
        return int(match.group(1)) if match else -1


def _nothing() -> None:
    return None


@dataclass(eq=False)
class Producer:
    producer_id: int
    name: str
    connection_id: int
    messages_in: int = 0
    bytes_in: int = 0
    #: Shared, Exclusive, ExclusiveWithFencing or WaitForExclusive (stats)
    access_mode: str = "Shared"
    #: the schema version it writes with (8 bytes; empty without a schema)
    schema_version: bytes = b""
    #: what closes it at its connection (an ExclusiveWithFencing producer took the topic)
    on_fenced: Callable[[], None] = _nothing

    def fence_out(self) -> None:
        self.on_fenced()

    @property
    def is_replicator(self) -> bool:
        """Another cluster's replicator (geo-replication), not a client's producer."""
        return self.name.startswith("pulsar.repl.")


class DuplicateMessage(Exception):
    """Deduplication found a sequence id at or below the last one persisted for the producer."""


class TopicFencedError(Exception):
    """The topic is being unloaded or handed over: it stores nothing more. Its producers are
    told to reconnect, and resend what got no receipt to the next owner."""


#: markers passed over at most when looking for the last user message (they come a few per
#: snapshot interval, and none on an idle topic)
_MAX_MARKERS_PASSED = 1000


def is_marker(data: bytes) -> bool:
    try:
        return read_metadata(data).HasField("marker_type")
    except FrameError:
        return False


@dataclass
class Topic:
    name: TopicName
    ledger: TopicLedger
    #: set when deduplication is enabled (broker setting or namespace policy)
    deduplication: Deduplication | None = None
    producers: dict[str, Producer] = field(default_factory=dict)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    #: set while the topic is handed over: new sends are not taken (clients resend them to the
    #: new owner), sends already being written still get their receipts
    fenced: bool = False
    in_flight: int = 0
    #: messages and bytes stored since the topic was loaded (for rates that survive producers)
    messages_in: int = 0
    bytes_in: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)
    #: the latest write (deduplication only: a duplicate's answer waits for earlier writes)
    _tail: asyncio.Future[Position] | None = None
    #: deduplicated publishes being written (made by the first: most topics never have one)
    _writes: BackgroundTasks | None = None
    #: geo-replication: what replicators from other clusters stored, by origin producer and
    #: sequence id (created when the first replicator producer connects)
    replicated_dedup: Deduplication | None = None
    #: run first at close (the replicators of this topic stop)
    on_close: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    #: PIP-33 marker entries stored (written here or replicated in), apart from user messages
    markers: MarkerIndex = field(default_factory=MarkerIndex)
    #: markers that came through producers (another cluster's replicator): not user messages
    markers_in: int = 0
    #: PIP-33 snapshots and updates, while the topic replicates to other clusters
    replicated_subscriptions: MarkerListener | None = None
    #: its policies (retention, TTL, backlog quota, limits) and rate limiters
    settings: TopicSettings = field(default_factory=TopicSettings)
    #: producer access modes and the topic epoch (kept with the managed ledger)
    access: ProducerAccess = field(init=False)

    def __post_init__(self) -> None:
        self.access = ProducerAccess(self.ledger)

    @classmethod
    async def load(cls, name: TopicName, ledger: TopicLedger, *, deduplication: bool) -> Topic:
        topic = cls(name, ledger)
        if deduplication:
            topic.deduplication = Deduplication(ledger)
            await topic.deduplication.recover()
        elif DEDUP_CURSOR in ledger.cursors:
            # Turned off: drop its state, as Pulsar does, so it no longer holds back retention.
            await ledger.delete_cursor(DEDUP_CURSOR)
        for cursor in ledger.cursors.values():
            if not cursor.name.startswith(_INTERNAL_CURSORS):
                replicated = cursor.properties.get(REPLICATED_PROPERTY) == 1
                topic.subscriptions[cursor.name] = topic._new_subscription(
                    cursor.name, cursor, api.CommandSubscribe.Shared, replicated=replicated
                )
        return topic

    def client_producers(self) -> list[Producer]:
        """Its producers apart from other clusters' replicators (which access modes leave be)."""
        return [p for p in self.producers.values() if not p.is_replicator]

    def remove_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
            if not producer.is_replicator:
                self.access.removed(producer, self.client_producers())

    async def position_published_since(self, at_ms: int) -> Position:
        """The first entry published at or after ``at_ms`` (Pulsar's seek and reset-cursor by
        publish time); past the last message when there is none."""

        def published_since(candidate: Entry) -> bool:
            try:
                return read_metadata(candidate.data).publish_time >= at_ms
            except FrameError:
                return False

        found = await self.ledger.find_first_position(published_since)
        if found is not None:
            return found
        last = await self.last_dispatchable_position()
        return self.ledger.next_position(last) if last else self.ledger.first_position()

    async def last_dispatchable_position(self) -> Position | None:
        """The last entry a consumer can be given (Pulsar's getLastDispatchablePosition): PIP-33
        markers at the end are passed over, or a reader asking hasMessageAvailable would wait
        for a message that never comes. None when the topic holds no user message."""
        position = self.ledger.last_confirmed_entry
        for _ in range(_MAX_MARKERS_PASSED):
            if position is None:
                return None
            entry = await self.ledger.read_entry(position)
            if entry is None or not is_marker(entry.data):
                return position
            position = self.ledger.previous_position(position)
        return position

    def last_sequence_id(self, producer_name: str) -> int:
        """The highest sequence id stored for a producer (-1 when unknown or without dedup)."""
        return -1 if self.deduplication is None else self.deduplication.last_sequence_id(producer_name)

    async def publish(
        self,
        headers_and_payload: bytes,
        metadata: api.MessageMetadata,
        sequence_id: int | None = None,
        highest_sequence_id: int = 0,
    ) -> Position:
        """Append the producer's bytes (see ``publish_then``)."""
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self.publish_then(
            headers_and_payload, metadata, sequence_id, highest_sequence_id, functools.partial(settle, future)
        )
        return await future

    def publish_then(
        self,
        headers_and_payload: bytes,
        metadata: api.MessageMetadata,
        sequence_id: int | None,
        highest_sequence_id: int,
        done: AddCallback,
    ) -> None:
        """Append the producer's bytes; ``done(position, None)`` once stored, ``done(None,
        error)`` if not (DuplicateMessage when deduplication recognises them), never before this
        returns. A message no deduplication has to look at goes straight to the ledger: no task
        per message on a publish's path. Marker entries are noted apart and handed to the
        replicated-subscriptions controller. TopicFencedError (raised) once the topic is fenced:
        a publish started before is waited for by ``drain``, from its very start (a deduplicated
        one may first wait for earlier writes)."""
        if self.fenced:
            raise TopicFencedError(f"{self.name} is being unloaded")
        self.in_flight += 1
        self._idle.clear()
        finish = functools.partial(self._published, headers_and_payload, metadata, done)
        if self._direct(metadata):
            self.ledger.add_entry_then(headers_and_payload, finish)
            return
        if self._writes is None:
            self._writes = BackgroundTasks()
        write = self._writes.spawn(
            self._publish(headers_and_payload, metadata, sequence_id, highest_sequence_id)
        )
        write.add_done_callback(functools.partial(self._written, finish))

    def _direct(self, metadata: api.MessageMetadata) -> bool:
        """Whether a message goes straight to the ledger: no deduplication has to look at it."""
        if self.deduplication is not None:
            return False
        return self.replicated_dedup is None or not metadata.HasField("replicated_from")

    def _written(self, finish: AddCallback, write: asyncio.Future[Position]) -> None:
        if write.cancelled():
            finish(None, TopicFencedError(f"{self.name}: the write was cancelled"))
            return
        error = write.exception()
        finish(None if error is not None else write.result(), error)

    def _published(
        self,
        headers_and_payload: bytes,
        metadata: api.MessageMetadata,
        done: AddCallback,
        position: Position | None,
        error: BaseException | None,
    ) -> None:
        self.in_flight -= 1
        if not self.in_flight:
            self._idle.set()
        if position is not None and metadata.HasField("marker_type"):
            self._marker_stored(headers_and_payload, metadata, position)
        done(position, error)

    def _marker_stored(
        self, headers_and_payload: bytes, metadata: api.MessageMetadata, position: Position
    ) -> None:
        self.markers.add(position)
        if metadata.HasField("replicated_from"):
            self.markers_in += 1
        if len(self.markers.positions) > 1000:
            cursors = [c.mark_delete_position for c in self.ledger.cursors.values() if c.durable]
            if cursors:
                self.markers.forget_through(min(cursors))
        if self.replicated_subscriptions is not None:
            self.replicated_subscriptions.marker_stored(metadata, headers_and_payload, position)

    async def _publish(
        self,
        headers_and_payload: bytes,
        metadata: api.MessageMetadata,
        sequence_id: int | None = None,
        highest_sequence_id: int = 0,
    ) -> Position:
        """Append the producer's bytes; DuplicateMessage when deduplication recognises them.
        Replicated messages (``replicated_from`` set) are deduplicated by their origin cluster
        and position there, whatever the topic's own deduplication setting."""
        replicated = self.replicated_dedup is not None and metadata.HasField("replicated_from")
        dedup = self.replicated_dedup if replicated else self.deduplication
        if dedup is None:
            return await self._write(headers_and_payload)
        if replicated:
            producer, sequence = replicated_identity(metadata)
            highest = sequence
        else:
            producer = metadata.producer_name
            sequence = metadata.sequence_id if sequence_id is None else sequence_id
            highest = max(sequence, highest_sequence_id, metadata.highest_sequence_id)
        status = dedup.check(producer, sequence, highest)
        if status is not Status.NEW:
            # Answer after the writes before it, so receipts stay in the producer's order.
            tail = self._tail
            if tail is not None and not tail.done():
                await asyncio.wait([tail])
            if status is Status.DUPLICATE or dedup.is_persisted(producer, sequence):
                raise DuplicateMessage(f"{producer}:{sequence}")
            # The earlier write of this sequence id failed: this one is the message.
        write = asyncio.ensure_future(self._write(headers_and_payload))
        self._tail = write
        position = await write
        dedup.stored(producer, highest, position)
        return position

    async def _write(self, headers_and_payload: bytes) -> Position:
        return await self.ledger.add_entry(headers_and_payload)

    async def accept_replication(self) -> None:
        """Ready the deduplication of replicated messages (a replicator producer connected)."""
        if self.replicated_dedup is None:
            dedup = Deduplication(self.ledger, cursor_name=REPLICATED_CURSOR_NAME, replicated_only=True)
            await dedup.recover()
            self.replicated_dedup = self.replicated_dedup or dedup

    async def subscription(
        self,
        name: str,
        sub_type: int,
        initial: InitialPosition,
        *,
        replicated: bool = False,
    ) -> Subscription:
        subscription = self.subscriptions.get(name)
        if subscription is None:
            cursor = await self.ledger.open_cursor(name, initial)
            subscription = self._new_subscription(name, cursor, sub_type, replicated=False)
            self.subscriptions[name] = subscription
        if replicated and not subscription.replicated:
            # PIP-33: remembered with the cursor, so the subscription stays replicated after a
            # restart or a move to another broker.
            subscription.replicated = True
            cursor = subscription.cursor
            await cursor.mark_delete(
                cursor.mark_delete_position, {**cursor.properties, REPLICATED_PROPERTY: 1}
            )
            await cursor.flush()
        return subscription

    def _new_subscription(
        self, name: str, cursor: ManagedCursor, sub_type: int, *, replicated: bool
    ) -> Subscription:
        subscription = Subscription(
            name, cursor, sub_type, replicated=replicated, markers=self.markers, listener=self
        )
        subscription.dispatcher.limiter = self.settings.dispatch
        settings = self.settings  # not the topic itself: a subscription must not hold it in a cycle
        subscription.dispatcher.delayed_delivery = lambda: settings.delayed_delivery
        if self.replicated_subscriptions is not None:
            subscription.snapshots.size = self.replicated_subscriptions.cache_size
        return subscription

    # -- PIP-33 (the subscriptions' listener) ---------------------------------------------------
    def marker_read(self, subscription: Subscription, data: bytes, marker_type: int) -> None:
        if marker_type == SNAPSHOT and self.replicated_subscriptions is not None:
            self.replicated_subscriptions.snapshot_read(subscription, data)

    async def advanced(self, subscription: Subscription) -> None:
        if self.replicated_subscriptions is not None:
            await self.replicated_subscriptions.advanced(subscription)

    def consumers_left(self, subscription: Subscription) -> None:
        if self.replicated_subscriptions is not None:
            self.replicated_subscriptions.consumers_left(subscription)

    def reader(self, name: str, after: Position, sub_type: int) -> Subscription:
        """A non-durable subscription reading the entries after ``after``.

        One of that name already there is taken as it is (as Pulsar's managed ledger gives a
        non-durable cursor back by name): above all a reader's whose seek closed its consumer,
        which the client subscribes to again, after a seek by time without a start message id,
        and which must go on where the seek put it. Replaced instead, it would be dropped with
        its dispatcher still running."""
        kept = self.subscriptions.get(name)
        if kept is not None and kept.durable:
            raise SubscriptionBusyError(f"a durable subscription named {name} already exists")
        if kept is not None:
            return kept
        cursor = self.ledger.new_non_durable_cursor(after, inclusive=False)
        subscription = Subscription(name, cursor, sub_type, markers=self.markers)
        self.subscriptions[name] = subscription
        return subscription

    async def unsubscribe(self, name: str) -> None:
        subscription = self.subscriptions.pop(name, None)
        if subscription is not None:
            await subscription.close()
            if subscription.durable:
                await self.ledger.delete_cursor(name)

    async def terminate(self) -> Position:
        """No message may be published any more (Pulsar's topic termination); the last one."""
        last = await self.ledger.terminate()
        return last if last is not None else self.ledger.before_first()

    def consumers(self) -> list[Consumer]:
        return [c for s in self.subscriptions.values() for c in s.consumers]

    async def drain(self, timeout_s: float = 10.0) -> bool:
        """Wait until every send taken before the fence has been written (or failed); False
        when some are still being written after ``timeout_s``."""
        if self.in_flight:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout_s)
        return not self.in_flight

    async def fence(self) -> bool:
        """Refuse new sends (their producers resend them to the next owner) and wait for those
        taken, so each gets its receipt while its producer is still attached here; True when
        none is left in flight (so receipts can no longer follow a close of the producers)."""
        self.fenced = True
        return await self.drain()

    async def close(self) -> None:
        self.access.withdraw_all(f"{self.name} is being unloaded")
        try:
            for hook in self.on_close:
                with contextlib.suppress(Exception):
                    await hook()
            for subscription in list(self.subscriptions.values()):
                await subscription.close()
            for dedup in (self.deduplication, self.replicated_dedup):
                if dedup is not None:
                    with contextlib.suppress(Exception):
                        await dedup.snapshot()
        finally:
            self.on_close.clear()  # run once; its hooks refer to the topic
            await self.ledger.close()
