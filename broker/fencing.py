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
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from magnetar.broker.topic import Topic

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0


def is_fenced(topic: Topic) -> bool:
    return topic.fenced or topic.ledger.is_fenced


class FencedTopicWatchdog:
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        #: topic (by identity) -> when it was first seen fenced
        self._since: dict[int, tuple[Topic, float]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def attached_topics(self) -> list[Topic]:
        """Every topic a broker holds: loaded ones and ones that clients are still attached to
        after the broker let go of them."""
        found = {id(t): t for t in self.service.topics.values()}
        for connection in self.service.connections:
            for topic in connection.attached_topics():
                found.setdefault(id(topic), topic)
        return list(found.values())

    def check(self, now: float) -> list[Topic]:
        """The topics fenced past the timeout (and forget the ones no longer fenced)."""
        timeout_s = self.service.config.topic_fencing_timeout_seconds
        seen = {}
        expired = []
        for topic in self.attached_topics():
            if not is_fenced(topic):
                continue
            _, since = self._since.get(id(topic), (topic, now))
            seen[id(topic)] = (topic, since)
            if now - since >= timeout_s:
                expired.append(topic)
        self._since = seen
        return expired

    async def run(self) -> None:
        if self.service.config.topic_fencing_timeout_seconds <= 0:
            return
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            for topic in self.check(time.monotonic()):
                self.recover(topic)

    def recover(self, topic: Topic) -> None:
        name = str(topic.name)
        log.warning(
            "topic %s fenced for more than %d s: closing it so its clients reconnect",
            name,
            self.service.config.topic_fencing_timeout_seconds,
        )
        self._since.pop(id(topic), None)
        if self.service.topics.get(name) is topic:
            del self.service.topics[name]
        factory = self.service.factory
        if factory is not None and factory.get(topic.ledger.name) is topic.ledger:
            # Evict now, so the next open reads the metadata afresh even if closing hangs.
            factory.forget(topic.ledger.name)
        for connection in self.service.connections:
            connection.close_producers_and_consumers({name})
        task = asyncio.get_running_loop().create_task(self._close(topic))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, topic: Topic) -> None:
        timeout_s = max(1, self.service.config.topic_fencing_timeout_seconds)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(topic.close(), timeout_s)
