"""Preparing a transfer's destination before the source stops taking messages.

Profiling a transfer of 16 busy topics (bench/bench_unload.py) showed most of the handover
window spent by the destination opening the managed ledgers, and most of that creating each
topic's next ledger (ensemble choice, ledger id, ledger metadata: several metadata-store round
trips per topic). Nothing forces that to happen inside the window: the new ledger does not
depend on the old ones. So before fencing, the source asks the destination to *prepare* the
bundle's topics (``POST /admin/v2/internal/prepare/<tenant>/<ns>/<bundle>`` with the topic
names); the destination creates the ledgers (ManagedLedgerFactory.prepare), and its open after
the source has closed only records them. A failed or slow prepare changes nothing but speed;
an unused prepared ledger is deleted after a minute.
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

PREPARE_TIMEOUT_S = 10.0


async def ask_to_prepare(target: BrokerInfo, namespace: str, bundle: Bundle, topics: list[str]) -> None:
    """Have ``target`` prepare ``topics``; never raises (preparing only saves time)."""
    import aiohttp

    if not topics:
        return
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
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.info("prepare on %s failed (%s): the transfer goes on without it", target.broker_id, exc)


async def prepare(service: BrokerService, topics: list[str]) -> int:
    """Create the next ledger of each topic; returns how many were prepared."""
    assert service.factory is not None
    names = [TopicName.parse(t).managed_ledger_name for t in topics]
    results = await asyncio.gather(*(service.factory.prepare(n) for n in names), return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        log.info("%d of %d topics not prepared: %s", len(failed), len(names), failed[0])
    return len(names) - len(failed)
