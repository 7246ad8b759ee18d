"""A server's stop signal with its event loop stuck: the process still ends within its bound.

A real process (the servers' own signal set-up on uvloop) whose loop is stuck in a call that never
returns, as a broker's was in a write to kazoo's wake-up channel with ZooKeeper gone."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

# The loop runs one callback that never returns (a sleep, retried after each signal as a blocked
# write is); ``stop`` would print and exit cleanly, but never gets to run.
STUCK = """
import asyncio, sys, time
from magnetar.common.process import run, stop_on_signals

async def main():
    stop_on_signals(lambda: print("stopped cleanly", flush=True), %(bound)s, "stuck-server")
    asyncio.get_running_loop().call_soon(lambda: (print("stuck", flush=True), time.sleep(3600)))
    await asyncio.sleep(3600)

run(main())
"""

IDLE = """
import asyncio
from magnetar.common.process import run, stop_on_signals

async def main():
    stop = asyncio.Event()
    stop_on_signals(stop.set, 30, "idle-server")
    print("ready", flush=True)
    await stop.wait()
    print("stopped cleanly", flush=True)

run(main())
"""


def _start(code: str, first_line: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == first_line
    return process


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stuck_loop_still_ends_the_process_within_its_bound(sig: signal.Signals) -> None:
    process = _start(STUCK % {"bound": 1.0}, "stuck")
    try:
        sent = time.monotonic()
        process.send_signal(sig)
        status = process.wait(timeout=60)
        waited = time.monotonic() - sent
        _, err = process.communicate()
    finally:
        process.kill()
    assert status == 1, err
    assert "stuck-server did not exit within 1s of being asked to stop" in err
    assert waited >= 1.0, "ended before its bound, so not by the bound"


def test_an_idle_loop_stops_cleanly_at_the_signal() -> None:
    process = _start(IDLE, "ready")
    try:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert (process.returncode, out.strip()) == (0, "stopped cleanly"), err
