"""Disruption windows measured by lean clients: a workload of producer and consumer
processes (``lean_client.py``, a few topics each), and what a move did to it.

A message's lateness is the time from when its send was due to its receipt (producer) or its
arrival (consumer). The window of a topic around a move is the largest lateness of the messages
due from one second before the move to four after; a stall of the broker shows in full, while the
schedule's own interval does not. The same workload with nothing moved gives the floor: the
lateness the machine and the clients cause by themselves. A target can only be judged when the
floor is at most a tenth of it; otherwise the verdict says so instead of met or missed.

Scripts import it as ``from windows import …`` (bench/ is on ``sys.path`` when a script in it runs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import percentile, stop_process

CLIENT = Path(__file__).parent / "lean_client.py"
#: around a move: one second before it to four after
BEFORE_S, AFTER_S = 1.0, 4.0
#: a target is judged only when the floor is at most this share of it
FLOOR_SHARE = 0.10
#: a lean client process and the file its records go to
Client = tuple[subprocess.Popen[str], Path]


@dataclass
class Records:
    """What one role's processes recorded: per topic, the due and done times (ns) of each message."""

    due_ns: dict[str, list[int]] = field(default_factory=dict)
    done_ns: dict[str, list[int]] = field(default_factory=dict)

    def add(self, data: dict[str, Any]) -> None:
        for topic, due, done in zip(data["topics"], data["due_ns"], data["done_ns"], strict=True):
            self.due_ns[topic] = due
            self.done_ns[topic] = done

    @property
    def count(self) -> int:
        return sum(len(due) for due in self.due_ns.values())

    def _lateness_ms(self, topic: str, start_ns: int, end_ns: int) -> list[float]:
        """The lateness of ``topic``'s messages due within [start, end]."""
        pairs = zip(self.due_ns[topic], self.done_ns[topic], strict=True)
        return [(done - due) / 1e6 for due, done in pairs if start_ns <= due <= end_ns]

    def latencies_ms(self, start_ns: int, end_ns: int) -> list[float]:
        """The lateness of every message due within [start, end], all topics together."""
        return [ms for topic in self.due_ns for ms in self._lateness_ms(topic, start_ns, end_ns)]

    def windows_ms(self, start_ns: int, end_ns: int) -> list[float]:
        """Per topic, the largest lateness of the messages due within [start, end]."""
        return [max(self._lateness_ms(topic, start_ns, end_ns), default=0.0) for topic in self.due_ns]

    def latest(self, start_ns: int, end_ns: int) -> tuple[str, int, float] | None:
        """The latest message due within [start, end]: its topic, due time (ns) and lateness (ms)."""
        found = [
            (done - due, topic, due)
            for topic in self.due_ns
            for due, done in zip(self.due_ns[topic], self.done_ns[topic], strict=True)
            if start_ns <= due <= end_ns
        ]
        if not found:
            return None
        late, topic, due = max(found)
        return topic, due, late / 1e6


@dataclass
class LeanWorkload:
    """Producers and consumers of ``topics`` in processes of their own, ``per_process`` topics
    each, ``rate`` msg/s per topic, unbatched. Start it, move something, stop it, read the windows."""

    url: str
    topics: list[str]
    rate: float
    workdir: Path
    per_process: int = 4
    size: int = 256
    #: a secured cluster's token, and the listener outside clients look brokers up on (pods)
    token_file: Path | None = None
    listener_name: str = ""
    _producers: list[Client] = field(default_factory=list)
    _consumers: list[Client] = field(default_factory=list)

    def start(self) -> None:
        """Consumers first (so they see every message), then producers; returns when all are sending."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        groups = [self.topics[i : i + self.per_process] for i in range(0, len(self.topics), self.per_process)]
        self._consumers = [self._spawn("consume", g, n) for n, g in enumerate(groups)]
        self._producers = [self._spawn("produce", g, n) for n, g in enumerate(groups)]

    def _spawn(self, role: str, topics: list[str], n: int) -> Client:
        options = ["--rate", str(self.rate), "--size", str(self.size),
                   *(["--token-file", str(self.token_file)] if self.token_file else []),
                   *(["--listener-name", self.listener_name] if self.listener_name else [])]  # fmt: skip
        return spawn(role, self.url, topics, self.workdir / f"{role}-{n}.json", options)

    def stop(self, drain_s: float = 3.0) -> tuple[Records, Records]:
        """Stops the producers (each waits for its receipts), lets the consumers drain, stops them;
        the producers' and the consumers' records. A client that failed fails the benchmark."""
        try:
            produced = collect(self._producers, 120, "a producer's send failed or was never answered")
            time.sleep(drain_s)
            consumed = collect(self._consumers, 60, "a consumer process failed")
        finally:
            for process, _ in self._producers + self._consumers:
                stop_process(process)
        return produced, consumed


def spawn(role: str, url: str, topics: list[str], out: Path, options: list[str]) -> Client:
    """One lean client process (``lean_client.py`` ``role`` with ``options``), once it is
    connected; with the file its records go to."""
    command = [sys.executable, str(CLIENT), role, url, ",".join(topics), "--out", str(out), *options]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()  # blocks until the client is connected (or died)
    if "ready" not in line:
        stop_process(process)
        raise RuntimeError(f"lean {role} client for {topics} did not start (exit {process.poll()})")
    return process, out


def collect(clients: list[Client], timeout_s: float, failure: str) -> Records:
    """SIGTERM to each client, then each one's records once it exited cleanly."""
    records = Records()
    for process, _ in clients:
        process.terminate()
    for process, out in clients:
        if process.wait(timeout_s) != 0:
            raise RuntimeError(f"{failure} (see its stderr)")
        records.add(json.loads(out.read_text()))
    return records


def _spread(name: str, values: list[float], empty: float) -> dict[str, float]:
    """``name``_p50_ms, _p99_ms and _max_ms of ``values``."""
    return {f"{name}_p50_ms": percentile(values, 0.5), f"{name}_p99_ms": percentile(values, 0.99),
            f"{name}_max_ms": max(values, default=empty)}  # fmt: skip


def lost(produced: Records, consumed: Records) -> int:
    """Messages the broker acknowledged that no consumer received (their due time is their id)."""
    return sum(len(set(due) - set(consumed.due_ns.get(t, []))) for t, due in produced.due_ns.items())


def summarize(produced: Records, consumed: Records, moved_ns: int) -> dict[str, Any]:
    start, end = moved_ns - int(BEFORE_S * 1e9), moved_ns + int(AFTER_S * 1e9)
    return {
        **_spread("producer", produced.windows_ms(start, end), 0.0),
        **_spread("consumer", consumed.windows_ms(start, end), 0.0),
        "acked": produced.count, "lost": lost(produced, consumed),
    }  # fmt: skip


def latency(produced: Records, consumed: Records, start_ns: int, end_ns: int) -> dict[str, Any]:
    """Publish (due to receipt) and end-to-end (due to arrival) percentiles of every message due
    within [start, end]."""
    e2e = consumed.latencies_ms(start_ns, end_ns)
    return {
        **_spread("publish", produced.latencies_ms(start_ns, end_ns), float("nan")),
        **_spread("e2e", e2e, float("nan")), "samples": len(e2e), "lost": lost(produced, consumed),
    }  # fmt: skip


def verdict(value: float, target: float, floor: float) -> str:
    """met / missed, or why it cannot be told: the floor is over a tenth of the target."""
    if floor > FLOOR_SHARE * target:
        return f"cannot tell (floor {floor:.1f} ms > {FLOOR_SHARE:.0%} of {target:g} ms)"
    return "met" if value <= target else "missed"
