"""Backlog quotas (Pulsar's ``destination_storage`` backlogQuota): how many bytes a topic's
slowest subscription has not acknowledged, whether that is over the topic's quota, and
``consumer_backlog_eviction``, which acknowledges the oldest messages until it no longer is."""

from __future__ import annotations

import math

from magnetar.broker.managed_ledger import Position
from magnetar.broker.policies.data import BacklogQuota
from magnetar.broker.topic import Topic

EVICTION = "consumer_backlog_eviction"


def backlog_bytes(topic: Topic) -> int:
    """Bytes after the slowest durable subscription's mark-delete position."""
    marks = [s.cursor.mark_delete_position for s in topic.subscriptions.values() if s.durable]
    return bytes_after(topic, min(marks)) if marks else 0


def bytes_after(topic: Topic, first: Position) -> int:
    """Bytes stored after ``first`` (per-ledger averages for the ledger it is in, as Pulsar
    estimates a backlog's size)."""
    last = topic.ledger.last_confirmed_entry
    total = 0
    for info in topic.ledger.ledgers:
        entries = info.entries
        if entries < 0:  # the ledger being written
            entries = last.entry_id + 1 if last is not None and last.ledger_id == info.ledger_id else 0
        if info.ledger_id > first.ledger_id:
            total += info.size
        elif info.ledger_id == first.ledger_id and entries > 0:
            total += info.size * max(0, entries - 1 - first.entry_id) // entries
    return total


def exceeded(topic: Topic) -> BacklogQuota | None:
    """The topic's quota when its backlog is over it."""
    quota = topic.settings.policies.backlogQuota
    if quota is None or quota.limitSize < 0 or backlog_bytes(topic) <= quota.limitSize:
        return None
    return quota


async def evict(topic: Topic, limit: int) -> int:
    """Acknowledge the slowest subscriptions' oldest messages until the backlog is within
    ``limit`` bytes; the number of entries skipped."""
    skipped = 0
    durable = [s for s in topic.subscriptions.values() if s.durable]
    for _ in range(2 * len(durable)):
        excess = backlog_bytes(topic) - limit
        if excess <= 0:
            break
        slowest = min(durable, key=lambda s: s.cursor.mark_delete_position)
        average = max(1, topic.ledger.total_size // max(1, topic.ledger.number_of_entries))
        count = math.ceil(excess / average)
        skipped += len(slowest.pending(count))
        await slowest.skip(count)
    return skipped
