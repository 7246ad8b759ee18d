"""A persistent topic: producers append to its managed ledger, subscriptions read from it.

The entry stored is exactly what the producer sent after the SEND command (magic, checksum,
metadata, payload): batches stay batches and compressed payloads stay compressed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import dataclass, field

from magnetar.broker.consumer import Consumer
from magnetar.broker.managed_ledger import InitialPosition, ManagedLedger, Position
from magnetar.broker.subscription import Subscription
from magnetar.proto import PulsarApi_pb2 as api

log = logging.getLogger(__name__)

_TOPIC = re.compile(r"^(persistent|non-persistent)://([^/]+)/([^/]+)/(.+)$")


class InvalidTopicNameError(ValueError):
    pass


@dataclass(frozen=True)
class TopicName:
    domain: str
    tenant: str
    namespace: str
    local: str

    @classmethod
    def parse(cls, name: str) -> TopicName:
        match = _TOPIC.match(name)
        if match is None or not all(match.groups()):
            raise InvalidTopicNameError(
                f"invalid topic name {name!r}: expected persistent://tenant/namespace/topic"
            )
        return cls(*match.groups())

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def managed_ledger_name(self) -> str:
        return f"{self.tenant}/{self.namespace}/{self.domain}/{self.local}"

    @property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"


@dataclass(eq=False)
class Producer:
    producer_id: int
    name: str
    connection_id: int
    messages_in: int = 0
    bytes_in: int = 0


class DuplicateMessage(Exception):
    """Deduplication found a sequence id at or below the last one persisted for the producer."""


@dataclass
class Topic:
    name: TopicName
    ledger: ManagedLedger
    deduplication: bool = False
    producers: dict[str, Producer] = field(default_factory=dict)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    #: highest sequence id persisted per producer name (deduplication)
    last_sequence: dict[str, int] = field(default_factory=dict)
    #: set while the topic is handed over: new sends are not taken (clients resend them to the
    #: new owner), sends already being written still get their receipts
    fenced: bool = False
    in_flight: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    async def load(cls, name: TopicName, ledger: ManagedLedger, *, deduplication: bool) -> Topic:
        topic = cls(name, ledger, deduplication)
        for cursor in ledger.cursors.values():
            topic.subscriptions[cursor.name] = Subscription(cursor.name, cursor, api.CommandSubscribe.Shared)
        return topic

    async def publish(self, headers_and_payload: bytes, metadata: api.MessageMetadata) -> Position:
        producer_name = metadata.producer_name
        sequence = metadata.highest_sequence_id or metadata.sequence_id
        if self.deduplication and sequence <= self.last_sequence.get(producer_name, -1):
            raise DuplicateMessage(f"{producer_name}:{sequence}")
        self.in_flight += 1
        self._idle.clear()
        try:
            position = await self.ledger.add_entry(headers_and_payload)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._idle.set()
        if self.deduplication:
            self.last_sequence[producer_name] = max(self.last_sequence.get(producer_name, -1), sequence)
        return position

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
            subscription = Subscription(name, cursor, sub_type, replicated=replicated)
            self.subscriptions[name] = subscription
        return subscription

    def reader(self, name: str, start: Position, sub_type: int) -> Subscription:
        cursor = self.ledger.new_non_durable_cursor(start)
        subscription = Subscription(name, cursor, sub_type)
        self.subscriptions[name] = subscription
        return subscription

    async def unsubscribe(self, name: str) -> None:
        subscription = self.subscriptions.pop(name, None)
        if subscription is not None:
            await subscription.close()
            if subscription.durable:
                await self.ledger.delete_cursor(name)

    def consumers(self) -> list[Consumer]:
        return [c for s in self.subscriptions.values() for c in s.consumers]

    async def drain(self, timeout_s: float = 10.0) -> None:
        """Wait until every send taken before the fence has been written (or failed)."""
        if self.in_flight:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout_s)

    async def close(self) -> None:
        for subscription in list(self.subscriptions.values()):
            await subscription.close()
        await self.ledger.close()
