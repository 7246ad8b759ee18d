"""A non-persistent topic: each message goes to the subscriptions that can take it now, or is
dropped for them (counted), as Pulsar's NonPersistentTopic does.

A subscription takes a message while its consumers have permits for it beyond what it already
holds undispatched; otherwise the message is dropped for that subscription alone (a slow
consumer of one subscription never holds up another, nor the producer). Dispatched messages
count as acknowledged at once: nothing is redelivered, since nothing is kept. Every
subscription, durable or a reader's, starts at the next message published, whatever position
it asks for; it lives as long as it has consumers. Delivery times are not waited for. No
deduplication, no compaction, no termination and no geo-replication: those need what is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.broker.managed_ledger import InitialPosition, Position
from magnetar.broker.non_persistent.memory_ledger import MemoryLedger
from magnetar.broker.subscription import Subscription
from magnetar.broker.topic import Topic, TopicName, TopicNotAllowedError
from magnetar.proto import PulsarApi_pb2 as api


@dataclass(eq=False)
class NonPersistentTopic(Topic):
    #: messages dropped per subscription since it was created (its consumers had no permits)
    drops: dict[str, int] = field(default_factory=dict)
    #: messages each subscription took, to tell how many it holds undispatched
    _taken: dict[str, int] = field(default_factory=dict)

    @classmethod
    def open(cls, name: TopicName, ledger: MemoryLedger) -> NonPersistentTopic:
        return cls(name, ledger)

    @property
    def messages_dropped(self) -> int:
        return sum(self.drops.values())

    def _direct(self, metadata: api.MessageMetadata) -> bool:
        return False  # each message is offered to the subscriptions once stored (``_publish``)

    async def _publish(
        self,
        headers_and_payload: bytes,
        metadata: api.MessageMetadata,
        sequence_id: int | None = None,
        highest_sequence_id: int = 0,
    ) -> Position:
        position = await self.ledger.add_entry(headers_and_payload)
        messages = max(1, metadata.num_messages_in_batch)
        for name, subscription in list(self.subscriptions.items()):
            if self._has_room(name, subscription, messages):
                self._taken[name] = self._taken.get(name, 0) + messages
            else:
                self.drops[name] = self.drops.get(name, 0) + messages
                await subscription.cursor.delete([position])
        self._forget_dispatched()
        return position

    def _has_room(self, name: str, subscription: Subscription, messages: int) -> bool:
        dispatcher = subscription.dispatcher
        held = self._taken.get(name, 0) - dispatcher.messages_out
        return dispatcher.free_permits() - held >= messages

    def _forget_dispatched(self) -> None:
        """Entries every subscription has dispatched or dropped leave memory."""
        ledger = self.ledger
        assert isinstance(ledger, MemoryLedger)
        marks = [s.cursor.mark_delete_position for s in self.subscriptions.values()]
        last = ledger.last_confirmed_entry
        if last is not None:
            ledger.forget_through(min(marks, default=last))

    async def subscription(
        self,
        name: str,
        sub_type: int,
        initial: InitialPosition,
        *,
        replicated: bool = False,
    ) -> Subscription:
        return self.subscriptions.get(name) or self._subscribe(name, sub_type)

    def reader(self, name: str, after: Position, sub_type: int) -> Subscription:
        return self.subscriptions.get(name) or self._subscribe(name, sub_type)

    def _subscribe(self, name: str, sub_type: int) -> Subscription:
        cursor = self.ledger.new_non_durable_cursor(InitialPosition.LATEST)
        subscription = self._new_subscription(name, cursor, sub_type, replicated=False)
        subscription.dispatcher.at_most_once = True
        subscription.dispatcher.on_sent = self._forget_dispatched
        # As Pulsar's non-persistent dispatchers: a delivery time is not waited for (holding the
        # message back would mean keeping it).
        subscription.dispatcher.delayed_delivery = lambda: False
        self.subscriptions[name] = subscription
        self.drops[name] = 0
        self._taken[name] = 0
        return subscription

    async def terminate(self) -> Position:
        raise TopicNotAllowedError(f"{self.name}: a non-persistent topic cannot be terminated")

    async def unsubscribe(self, name: str) -> None:
        await super().unsubscribe(name)
        self.drops.pop(name, None)
        self._taken.pop(name, None)
