"""The event-loop monitor on a real loop (asyncio's and uvloop's): a blocked loop shows as lag,
as a slow callback named for the code that blocked it, and collections as GC pauses."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop
from prometheus_client import CollectorRegistry, generate_latest

from magnetar.common.loop_monitor import LoopCollector, LoopMonitor

Runner = Callable[[Coroutine[Any, Any, None]], None]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Runner:
    return asyncio.run if request.param == "asyncio" else uvloop.run


async def block_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # noqa: ASYNC251 - deliberately blocking: the stall under test


def late_beats(monitor: LoopMonitor, at_least_s: float) -> int:
    """Heartbeats that were surely late by ``at_least_s`` or more (their whole bucket above it)."""
    bounds = (0.0, *monitor.lag.bounds)
    return sum(count for lower, count in zip(bounds, monitor.lag.counts, strict=True) if lower >= at_least_s)


def page(monitor: LoopMonitor) -> str:
    registry = CollectorRegistry()
    registry.register(LoopCollector(monitor))
    return generate_latest(registry).decode()


def test_a_blocked_loop_is_lag_and_a_named_slow_callback(run: Runner) -> None:
    monitor = LoopMonitor()

    async def main() -> None:
        monitor.start()
        try:
            await asyncio.sleep(0.1)  # some beats of a healthy loop first
            await asyncio.create_task(block_the_loop(0.3))
            deadline = time.monotonic() + 10
            while not late_beats(monitor, 0.2):
                assert time.monotonic() < deadline, "the heartbeat never reported the blocked loop"
                await asyncio.sleep(0.02)
        finally:
            monitor.stop()

    run(main())
    name = f"{__name__}.block_the_loop"
    assert monitor.slow_callbacks[name] == 1, dict(monitor.slow_callbacks)
    text = page(monitor)
    assert f'magnetar_event_loop_slow_callbacks_total{{callback="{name}"}} 1.0' in text
    assert 'magnetar_event_loop_lag_seconds_bucket{le="+Inf"}' in text


def test_the_heartbeat_samples_several_times_a_second(run: Runner) -> None:
    monitor = LoopMonitor()

    async def main() -> None:
        monitor.start()
        try:
            for _ in range(10):
                await asyncio.sleep(0.1)
        finally:
            monitor.stop()

    run(main())
    assert monitor.lag.count >= 5


def test_collections_are_timed_by_generation(run: Runner) -> None:
    monitor = LoopMonitor()

    async def main() -> None:
        monitor.start()
        try:
            gc.collect()
            gc.collect(0)
        finally:
            monitor.stop()

    run(main())
    assert monitor.gc_pauses[2].count >= 1
    assert monitor.gc_pauses[0].count >= 1
    assert 'magnetar_gc_pause_seconds_count{generation="2"}' in page(monitor)
