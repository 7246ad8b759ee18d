"""The admin REST while the metadata store is out of reach: a JSON 503 within 2 s, not
a call hanging until the store client notices, and answers again once the store is back."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.service import BrokerService
from magnetar.local.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper


@pytest.fixture
async def broker(own_zookeeper: ZooKeeperServer) -> AsyncIterator[BrokerService]:
    service = BrokerService(
        BrokerConfig(
            metadata_store_url=own_zookeeper.url("/outage"),
            broker_service_port=0,
            web_service_port=0,
            metadata_store_session_timeout_millis=30_000,
        )
    )
    await service.start()
    yield service
    await service.stop()


async def _get(url: str) -> tuple[int, dict[str, object] | list[object], float]:
    started = time.monotonic()
    async with aiohttp.ClientSession() as session, session.get(url, timeout=aiohttp.ClientTimeout(30)) as r:
        body = await r.json()
        return r.status, body, time.monotonic() - started


async def test_admin_calls_answer_503_at_once_while_zookeeper_is_frozen(
    broker: BrokerService, own_zookeeper: ZooKeeperServer
) -> None:
    url = f"{broker.web_service_url}/admin/v2/tenants"
    status, body, _ = await _get(url)
    assert status == 200
    assert "public" in body
    assert own_zookeeper.pid is not None
    os.kill(own_zookeeper.pid, signal.SIGSTOP)
    try:
        for _ in range(3):
            status, body, elapsed = await _get(url)
            assert status == 503
            assert isinstance(body, dict)
            assert "metadata store" in str(body["reason"])
            assert elapsed < 2.0, f"answered after {elapsed:.1f} s"
        # /metrics never waits for the store: Prometheus keeps scraping through the outage
        assert "pulsar_rate_in" in await asyncio.wait_for(_metrics(broker), 2.0)
    finally:
        os.kill(own_zookeeper.pid, signal.SIGCONT)
    deadline = time.monotonic() + 20
    while True:
        status, body, _ = await _get(url)
        if status == 200 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert status == 200
    assert "public" in body


async def _metrics(broker: BrokerService) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"{broker.web_service_url}/metrics") as r:
        return await r.text()
