"""Policies the broker enforces over time, as Pulsar's BrokerService does: message TTLs every
``message_expiry_check_interval_in_minutes`` and backlog quotas every
``backlog_quota_check_interval_in_seconds`` (producers of a topic over its quota are disconnected,
to be held or refused when they come back; with eviction, the oldest messages are acknowledged),
and compaction thresholds every ``broker_service_compaction_monitor_interval_in_seconds``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from magnetar.broker.compaction.compactor import CURSOR as COMPACTION_CURSOR
from magnetar.broker.config import BrokerConfig
from magnetar.broker.managed_ledger import TopicLedger
from magnetar.broker.policies import message_expiry
from magnetar.broker.policies.applied import PolicyUpdates
from magnetar.broker.policies.backlog_quota import EVICTION, bytes_after, evict, exceeded
from magnetar.broker.topic import Topic

log = logging.getLogger(__name__)


class LoadedTopics(Protocol):
    def loaded(self) -> list[Topic]: ...


class ProducerCloser(Protocol):
    def close_producers(self, topics: set[str]) -> None: ...


class CompactionStarter(Protocol):
    def start(self, topic: str, ledger: TopicLedger) -> None: ...


class PolicyChecks:
    def __init__(
        self, topics: LoadedTopics, producers: ProducerCloser, compactions: CompactionStarter
    ) -> None:
        self._topics = topics
        self._producers = producers
        self._compactions = compactions

    async def compact_over_threshold(self) -> None:
        """Topics with more than their ``compactionThreshold`` after their last compaction's
        horizon are compacted (Pulsar's compaction monitor)."""
        for topic in self._topics.loaded():
            threshold = topic.settings.policies.compactionThreshold or 0
            if threshold <= 0 or not topic.name.is_persistent:
                continue
            cursor = topic.ledger.cursors.get(COMPACTION_CURSOR)
            horizon = cursor.mark_delete_position if cursor is not None else topic.ledger.before_first()
            if bytes_after(topic, horizon) > threshold:
                self._compactions.start(str(topic.name), topic.ledger)

    async def expire_messages(self) -> None:
        for topic in self._topics.loaded():
            ttl = topic.settings.policies.messageTTL or 0
            if ttl > 0 and topic.name.is_persistent:
                try:
                    await message_expiry.expire_all(topic, ttl)
                except Exception as exc:  # the next round tries again
                    log.warning("message expiry of %s failed: %s", topic.name, exc)

    async def check_backlog_quotas(self) -> None:
        for topic in self._topics.loaded():
            quota = exceeded(topic)
            if quota is None:
                continue
            if quota.policy == EVICTION:
                try:
                    skipped = await evict(topic, quota.limitSize)
                    log.info("%s over its backlog quota: %d oldest entries evicted", topic.name, skipped)
                except Exception as exc:
                    log.warning("backlog eviction of %s failed: %s", topic.name, exc)
            elif topic.producers:
                log.info("%s over its backlog quota: its producers are disconnected", topic.name)
                self._producers.close_producers({str(topic.name)})


async def every(interval_s: float, check: Callable[[], Awaitable[None]]) -> None:
    while True:
        await asyncio.sleep(interval_s)
        await check()


def policy_loops(
    topics: LoadedTopics,
    producers: ProducerCloser,
    updates: PolicyUpdates,
    config: BrokerConfig,
    compactions: CompactionStarter,
) -> list[Coroutine[Any, Any, None]]:
    """The loops that keep topic policies applied and enforced, for a broker to run."""
    checks = PolicyChecks(topics, producers, compactions)
    loops = [
        updates.run(topics),
        every(config.message_expiry_check_interval_in_minutes * 60, checks.expire_messages),
        every(config.broker_service_compaction_monitor_interval_in_seconds, checks.compact_over_threshold),
    ]
    if config.backlog_quota_check_enabled:
        loops.append(every(config.backlog_quota_check_interval_in_seconds, checks.check_backlog_quotas))
    return loops
