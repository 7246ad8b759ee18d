"""How late a server's event loop runs, what stalls it, and what the garbage collector costs it.

Everything a broker or bookie does waits on one event loop, so the loop's lateness is added to
every publish and every dispatch. Three figures, exported on the server's ``/metrics``:

- ``magnetar_event_loop_lag_seconds``: a timer's lateness, sampled every ``interval_s`` (100 ms).
  A healthy loop is late by well under a millisecond; a loop that runs one long callback, or too
  many short ones, is late by as much.
- ``magnetar_event_loop_slow_callbacks_total{callback}``: stalls over ``slow_s`` (10 ms) that hold
  up a heartbeat, named by the callback the loop was running when its heartbeat went that much
  overdue. A watchdog thread looks at the loop thread's stack then, so the loop itself pays nothing
  per callback (asyncio's own slow-callback log needs debug mode, which costs more than what it
  measures, and uvloop's handles are not Python objects to time). Each stall is logged at DEBUG
  with its name.
- ``magnetar_gc_pause_seconds{generation}``: each collection's duration. A collection holds the
  interpreter lock, so it stalls the loop whichever thread triggered it.

The monitor samples, because its own cost is what every idle server pays: a watchdog polling every
few milliseconds costs a few percent of a core per process. So the heartbeat beats ten times a
second, and the watchdog sleeps until the heartbeat it waits for would be ``slow_s`` overdue; a
stall of 10 ms or more is counted whenever it holds up a heartbeat.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.common.latency import LatencyHistogram

log = logging.getLogger(__name__)

#: buckets for collections: most young ones take tens of microseconds
GC_BOUNDS_S: tuple[float, ...] = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
)  # fmt: skip

#: functions through which an event loop runs its callbacks: the frame inside the innermost of
#: them is the callback (asyncio's own loop, its runner, and uvloop's Python entry point)
_RUN_FUNCTIONS = frozenset({"run", "run_forever", "_run_once", "_run", "run_until_complete"})
_LOOP_DIRS = (f"{Path(asyncio.__file__).parent}/", "/uvloop/")


class LoopMonitor:
    """Watches the event loop it is started on; one per process."""

    def __init__(self, *, interval_s: float = 0.1, slow_s: float = 0.010) -> None:
        self.interval_s = interval_s
        self.slow_s = slow_s
        self.lag = LatencyHistogram()
        self.gc_pauses = {generation: LatencyHistogram(GC_BOUNDS_S) for generation in range(3)}
        self.slow_callbacks: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._handle: asyncio.TimerHandle | None = None
        #: when the next heartbeat is due (perf_counter), read by the watchdog thread
        self._due = 0.0
        self._reported_due = 0.0
        self._gc_started = 0.0
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None

    def start(self) -> None:
        """Start watching the running loop."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._schedule()
        gc.callbacks.append(self._on_gc)
        self._watchdog = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._watchdog.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._handle is not None:
            self._handle.cancel()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._watchdog is not None:
            self._watchdog.join(timeout=1)

    # -- the heartbeat, on the loop ------------------------------------------------------------

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = time.perf_counter() + self.interval_s
        self._handle = self._loop.call_later(self.interval_s, self._beat)

    def _beat(self) -> None:
        self.lag.observe(max(0.0, time.perf_counter() - self._due))
        self._schedule()

    # -- the watchdog, on its own thread --------------------------------------------------------

    def _watch(self) -> None:
        wait_s = self.slow_s
        while not self._stopping.wait(wait_s):
            due = self._due
            wait_s = self.interval_s / 2
            if due == self._reported_due:
                continue  # this stall is counted; look again for the next heartbeat
            now = time.perf_counter()
            if now < due + self.slow_s:
                wait_s = due + self.slow_s - now  # asleep until the heartbeat would be overdue
                continue
            self._reported_due = due  # one count per stall, however long it lasts
            frame = sys._current_frames().get(self._loop_thread)
            name = callback_name(frame) if frame is not None else "?"
            self.slow_callbacks[name] += 1
            log.debug("event loop stalled over %.0f ms in %s", self.slow_s * 1000, name)

    # -- the collector's pauses, on whichever thread collects -----------------------------------

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        # Collections run with the interpreter lock held, so no two of these interleave.
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_pauses[info["generation"]].since(self._gc_started)


def callback_name(innermost: FrameType) -> str:
    """``module.qualname`` of the callback a loop thread is running, from its innermost frame:
    the first frame of application code inside the loop's run functions."""
    frames: list[FrameType] = []
    frame: FrameType | None = innermost
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()  # outermost first
    inside_loop = False
    for frame in frames:
        in_loop_code = frame.f_code.co_filename.startswith(_LOOP_DIRS[0]) or _LOOP_DIRS[1] in (
            frame.f_code.co_filename
        )
        if in_loop_code:
            inside_loop = inside_loop or frame.f_code.co_name in _RUN_FUNCTIONS
            continue
        if inside_loop:
            module = frame.f_globals.get("__name__", "?")
            return f"{module}.{frame.f_code.co_qualname}"
    return "(the event loop itself)"


class LoopCollector(Collector):
    """The monitor's figures for a Prometheus registry."""

    def __init__(self, monitor: LoopMonitor) -> None:
        self._monitor = monitor

    def collect(self) -> Iterator[Metric]:
        monitor = self._monitor
        yield monitor.lag.family(
            "magnetar_event_loop_lag_seconds",
            f"How late a timer on the event loop fired, sampled every {monitor.interval_s * 1000:.0f} ms",
        )
        slow = CounterMetricFamily(
            "magnetar_event_loop_slow_callbacks",
            f"Event-loop stalls over {monitor.slow_s * 1000:.0f} ms, by the callback running then",
            labels=["callback"],
        )
        for name, count in sorted(dict(monitor.slow_callbacks).items()):
            slow.add_metric([name], count)
        yield slow
        pauses = HistogramMetricFamily(
            "magnetar_gc_pause_seconds", "Garbage collections' durations by generation", labels=["generation"]
        )
        for generation, histogram in monitor.gc_pauses.items():
            pauses.add_metric([str(generation)], histogram.buckets(), histogram.sum_s)
        yield pauses
