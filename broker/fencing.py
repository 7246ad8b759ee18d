"""Recovery of topics left fenced (Pulsar's ``topicFencingTimeoutSeconds``).

A topic is fenced while it is handed over (a transfer stops taking sends) and when its managed
ledger was taken over by another broker (a deposed owner's writes fail). Normally the topic is
closed right after and its clients move on. When that does not happen (a handover that hangs on
the metadata store or the bookies, an owner that does not know it was deposed), clients stay
attached to a topic that can never take a message: every send is dropped or fails, and the
clients keep coming back to it ("Topic is temporarily unavailable").

The watchdog checks every second; a topic fenced for longer than ``topic_fencing_timeout_seconds``
is closed forcefully: dropped from the broker's table and the managed-ledger factory, its
producers and consumers closed (clients look the topic up again and reconnect, to this broker
with a freshly opened topic if it still owns the bundle, else to the new owner), and its
resources released in the background. 0 (Pulsar's default) disables the watchdog.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from magnetar.broker.topic import Topic

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0


def is_fenced(topic: Topic) -> bool:
    return topic.fenced or topic.ledger.is_fenced


class EvictableTopics(Protocol):
    """The broker's topic registry (broker/topics.py), as the watchdog uses it."""

    def loaded(self) -> list[Topic]: ...

    async def evict(self, topics: list[Topic], *, timeout_s: float | None = None) -> None: ...


class AttachedTopics(Protocol):
    """The broker's connections: the topics their clients are attached to."""

    def attached_topics(self) -> list[Topic]: ...


class FencedTopicWatchdog:
    def __init__(self, topics: EvictableTopics, connections: AttachedTopics, timeout_s: int) -> None:
        self._topics = topics
        self._connections = connections
        self._timeout_s = timeout_s
        #: topic (by identity) -> when it was first seen fenced
        self._since: dict[int, tuple[Topic, float]] = {}

    def attached_topics(self) -> list[Topic]:
        """Every topic a broker holds: loaded ones and ones that clients are still attached to
        after the broker let go of them."""
        found = {id(t): t for t in self._topics.loaded()}
        for topic in self._connections.attached_topics():
            found.setdefault(id(topic), topic)
        return list(found.values())

    def check(self, now: float) -> list[Topic]:
        """The topics fenced past the timeout (and forget the ones no longer fenced)."""
        seen = {}
        expired = []
        for topic in self.attached_topics():
            if not is_fenced(topic):
                continue
            _, since = self._since.get(id(topic), (topic, now))
            seen[id(topic)] = (topic, since)
            if now - since >= self._timeout_s:
                expired.append(topic)
        self._since = seen
        return expired

    async def run(self) -> None:
        if self._timeout_s <= 0:
            return
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            for topic in self.check(time.monotonic()):
                await self.recover(topic)

    async def recover(self, topic: Topic) -> None:
        """Evict the topic at once (the next open reads the metadata afresh) and tell its
        clients; its close, which may hang on what fenced it, goes on in the background."""
        log.warning(
            "topic %s fenced for more than %d s: closing it so its clients reconnect",
            topic.name,
            self._timeout_s,
        )
        self._since.pop(id(topic), None)
        await self._topics.evict([topic], timeout_s=0)
