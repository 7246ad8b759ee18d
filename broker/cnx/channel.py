"""What a connection's command handlers need: from the connection they serve, and from the broker."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from magnetar.broker.consumer import ConsumerChannel
from magnetar.broker.topic import Topic


class CommandChannel(ConsumerChannel, Protocol):
    @property
    def id(self) -> int: ...

    def spawn(self, work: Awaitable[None]) -> None:
        """Run ``work`` beside the read loop (the connection waits for it at its close)."""
        ...

    async def authorize(self, topic: str, *actions: str, subscription: str | None = None) -> None:
        """AuthorizationError unless the connection's role may do one of ``actions`` on ``topic``
        (and use ``subscription``, when the namespace names who may)."""
        ...


class TopicSource(Protocol):
    """The broker's topics, as the command handlers reach them."""

    async def get_or_load(self, name: str) -> Topic:
        """The topic, loaded on first use; NotServedError when its bundle is not served here."""
        ...
