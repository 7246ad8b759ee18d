"""Preparing a transfer's destination before the source stops taking messages.

Profiling a transfer of 16 busy topics (bench/bench_unload.py) showed most of the handover
window spent by the destination opening the managed ledgers, and most of that creating each
topic's next ledger (ensemble choice, ledger id, ledger metadata: several metadata-store round
trips per topic). Nothing forces that to happen inside the window: the new ledger does not
depend on the old ones. So before fencing, the source asks the destination to *prepare* the
bundle's topics (``POST /admin/v2/internal/prepare/<tenant>/<ns>/<bundle>`` with the topic
names); the destination creates the ledgers (ManagedLedgerFactory.prepare), and its open after
the source has closed only records them. A failed or slow prepare changes nothing but speed;
an unused prepared ledger is deleted after a minute. Ledgers are created a few at a time, and
the source waits for them at most ``PREPARE_TIMEOUT_S``.

Measured (2 cores shared by ZooKeeper, 2 bookies, 3 brokers and the client, load average 3-6):
the first close to the handover's end went from 140-310 ms to 70-230 ms, but the producers'
windows stayed at 300-600 ms, because most of a window lies outside the handover. One window of
655 ms: 130 ms fence to handover done; 160 ms until CLOSE_PRODUCER reached the client (queued
behind messages dispatched on the same connection); 110 ms reconnecting and re-creating 16
producers one PRODUCER at a time; 250 ms resending the ~1000 messages held back meanwhile until
the first receipt. The next steps are therefore on those: tell clients before the handover ends
(the destination would have to hold their PRODUCER/SUBSCRIBE until it owns the bundle) and
catch up the held-back messages faster.

So a prepare also tells the destination to expect the topics (BrokerService.expect_handover):
until the handover ends (or ``HANDOVER_HOLD_S``) a PRODUCER or SUBSCRIBE for one of them waits
there, off the connection's read loop, instead of being refused. The source then sends its
clients away as soon as every send it took has its receipt, and closes, releases and hands over
while they reconnect. A destination that did not answer the prepare holds nothing, so then the
clients are told only once it owns the bundle, as before.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from magnetar.broker.namespace import Bundle
from magnetar.broker.ownership import BrokerInfo
from magnetar.broker.topic import TopicName

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService

log = logging.getLogger(__name__)

#: the source waits this long at most: preparing only saves time, and a graceful shutdown
#: transfers its bundles one after the other
PREPARE_TIMEOUT_S = 2.0
PREPARE_CONCURRENCY = 2


async def ask_to_prepare(target: BrokerInfo, namespace: str, bundle: Bundle, topics: list[str]) -> bool:
    """Have ``target`` prepare ``topics``; never raises (preparing only saves time). True when
    the target prepared them, so it also holds their clients until the handover ends."""
    import aiohttp

    if not topics:
        return False
    url = f"{target.web_service_url}/admin/v2/internal/prepare/{namespace}/{bundle.name}"
    try:
        timeout = aiohttp.ClientTimeout(total=PREPARE_TIMEOUT_S)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, json={"topics": topics}) as response,
        ):
            if response.status != 200:
                log.info(
                    "prepare on %s: HTTP %d %s", target.broker_id, response.status, await response.text()
                )
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.info("prepare on %s failed (%s): the transfer goes on without it", target.broker_id, exc)
        return False


async def prepare(service: BrokerService, topics: list[str]) -> int:
    """Expect the topics (their clients may come before the handover ends: they wait for it),
    then create the next ledger of each; returns how many were prepared."""
    factory = service.factory
    assert factory is not None
    service.expect_handover(topics)
    names = [TopicName.parse(t).managed_ledger_name for t in topics]
    # A few at a time: a burst of ledger creations (metadata writes, each synced to disk by
    # ZooKeeper) slows the source's writes just before the handover when they share a host.
    room = asyncio.Semaphore(PREPARE_CONCURRENCY)

    async def one(name: str) -> None:
        async with room:
            await factory.prepare(name)

    # Shielded: a source that stopped waiting leaves ledgers created and kept (used by the open
    # that follows, or deleted after a while), never half-recorded.
    results = await asyncio.shield(asyncio.gather(*(one(n) for n in names), return_exceptions=True))
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        log.info("%d of %d topics not prepared: %s", len(failed), len(names), failed[0])
    return len(names) - len(failed)
