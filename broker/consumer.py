"""A consumer attached to a subscription: its permits, what it was sent and has not acked."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from magnetar.broker.managed_ledger import Entry, Position
from magnetar.broker.ownership import LookupUrls
from magnetar.broker.protocol import commands
from magnetar.proto import PulsarApi_pb2 as api


class SubType:
    """The subscription types, Pulsar's ``CommandSubscribe.SubType``, as plain integers: protobuf's
    enum wrapper looks each name up in Python, and the dispatcher asks on every dispatch."""

    Exclusive: int = api.CommandSubscribe.Exclusive
    Shared: int = api.CommandSubscribe.Shared
    Failover: int = api.CommandSubscribe.Failover
    Key_Shared: int = api.CommandSubscribe.Key_Shared
    Name = staticmethod(api.CommandSubscribe.SubType.Name)


class ConsumerChannel(Protocol):
    """What a consumer needs from its connection."""

    protocol_version: int

    def send(self, command: api.BaseCommand, headers_and_payload: bytes = b"") -> None: ...

    @property
    def remote(self) -> str: ...


@dataclass(eq=False)
class Consumer:
    consumer_id: int
    name: str
    channel: ConsumerChannel
    sub_type: int
    priority: int = 0
    permits: int = 0
    #: entries sent and not acknowledged: position -> messages in the entry
    pending: dict[Position, int] = field(default_factory=dict)
    messages_out: int = 0
    bytes_out: int = 0
    closed: bool = False
    #: Key_Shared STICKY: the hash ranges (inclusive) this consumer asked for; empty: AUTO_SPLIT
    sticky_ranges: list[tuple[int, int]] = field(default_factory=list)
    #: the partition its topic is of a partitioned topic (-1: not a partition), in every
    #: message id it is sent, as Pulsar's (the clients' message ids report it)
    partition: int = -1

    def deliver(
        self, entry: Entry, messages: int, redelivery_count: int, ack_set: list[int] | None = None
    ) -> None:
        """Send an entry; ``ack_set`` marks the messages of a batch still to be delivered."""
        message = commands.command(
            commands.T.MESSAGE,
            "message",
            consumer_id=self.consumer_id,
            message_id=commands.message_id(entry.position.ledger_id, entry.position.entry_id, self.partition),
            redelivery_count=redelivery_count,
            ack_set=ack_set,
        )
        self.channel.send(message, entry.data)
        self.pending[entry.position] = messages
        self.permits -= messages
        self.messages_out += messages
        self.bytes_out += len(entry.data)

    def set_active(self, active: bool) -> None:
        """Tell a Failover consumer whether it is the active one (protocol >= 12). Sent on the
        next loop turn, so a new consumer hears it after the SUCCESS of its SUBSCRIBE."""
        if self.channel.protocol_version >= 12:
            asyncio.get_running_loop().call_soon(self._send_active, active)

    def _send_active(self, active: bool) -> None:
        if not self.closed:
            self.channel.send(
                commands.command(
                    commands.T.ACTIVE_CONSUMER_CHANGE,
                    "active_consumer_change",
                    consumer_id=self.consumer_id,
                    is_active=active,
                )
            )

    def close_by_broker(self, assigned: LookupUrls | None = None) -> None:
        """Ask the client to reconnect (unload, seek; a transfer to ``assigned``)."""
        self.closed = True
        self.channel.send(
            commands.command(
                commands.T.CLOSE_CONSUMER,
                "close_consumer",
                consumer_id=self.consumer_id,
                request_id=0,
                assignedBrokerServiceUrl=(assigned.url or None) if assigned else None,
                assignedBrokerServiceUrlTls=(assigned.url_tls or None) if assigned else None,
            )
        )
