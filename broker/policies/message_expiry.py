"""Message TTL (Pulsar's messageTTL and expire-messages): what was published longer ago than the
TTL counts as acknowledged, for one subscription or all of a topic's."""

from __future__ import annotations

import time

from magnetar.broker.subscription import Subscription
from magnetar.broker.topic import Topic


async def expire(topic: Topic, subscription: Subscription, seconds: int) -> None:
    """Acknowledge every message of ``subscription`` published more than ``seconds`` ago."""
    first_kept = await topic.position_published_since(int(time.time() * 1000) - seconds * 1000)
    expired = topic.ledger.previous_position(first_kept)
    if expired is not None and expired > subscription.cursor.mark_delete_position:
        await subscription.acknowledge_cumulative(expired)


async def expire_all(topic: Topic, seconds: int) -> None:
    for subscription in list(topic.subscriptions.values()):
        if subscription.durable:
            await expire(topic, subscription, seconds)
