"""Synthetic runs whose answers are known: event logs and a journal built from a scenario, and the
windows, duplicates, losses, reorders and gaps a correct post-mortem must find in them.

The timeline is regular: a topic's producer sends message i at ``t0 + i·interval``; the broker
acknowledges it 2 ms later; each subscription receives it 2 ms after that and acks 0.2 ms later.
Disturbances are declared, not random, so every answer follows from the scenario:

- a producer stall ``[a, b)`` holds the acknowledgements of sends made in it until ``b``:
  one producer window and one topic window, from the first held send to ``b``;
- a consumer stall ``[a, b)`` holds that consumer's receipts due in it until ``b``: one consumer
  window from the acknowledgement of the first held message to ``b``;
- ``redeliver`` seqs are received twice from the same region, ``failover_dups`` again from the
  region the consumer switched to at ``switch_at``; ``lose`` seqs are never received; ``swap``
  pairs exchange their receipt times; ``stop_after`` ends a consumer early.

A topic with ``digests`` and a consumer with ``sub_type`` write version-2 lines: the payload's
digest on sends and receipts, the subscription's type on the consumer's lines (what the checkers
judge order by). Without them the lines are version 1, as the old golden logs were.

Times in a scenario are milliseconds from ``t0``. Also: ``bulk``, fast writing of big logs for the
benchmark.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from magnetar.common.run_directory import WORKLOAD_ACTIONS_MODULE, Layout, payload_digest

T0 = 1_800_000_000_000_000_000
MS = 1_000_000
PUBLISH_MS, DELIVER_MS, ACK_MS = 2.0, 2.0, 0.2
FLUSH_NS = 1_000  # held messages are released 1 µs apart
#: the provider module of the journal's faults: any module but the workload's makes a fault
FAULT_MODULE = "faults.actions"


@dataclass(frozen=True)
class Stall:
    start_ms: float
    end_ms: float
    fault: str = "none"  # the fault a correct attribution gives its window


@dataclass(frozen=True)
class ConsumerSpec:
    client: str
    subscription: str
    cluster: str = "east"
    stalls: tuple[Stall, ...] = ()
    redeliver: tuple[int, ...] = ()
    switch_at: int | None = None  # from this seq on, receipts come from ``switch_to``
    switch_to: str = "west"
    failover_dups: tuple[int, ...] = ()  # received again right after the switch
    lose: tuple[int, ...] = ()
    swap: tuple[tuple[int, int], ...] = ()
    stop_after: int | None = None
    sub_type: str | None = None  # the subscription's type, logged on its lines (version 2)


@dataclass(frozen=True)
class TopicSpec:
    name: str
    producer: str
    messages: int
    consumers: tuple[ConsumerSpec, ...]
    interval_ms: float = 10.0
    keys: int = 4
    stalls: tuple[Stall, ...] = ()
    cluster: str = "east"
    digests: bool = False  # sends and receipts carry the payload's digest (version 2)

    @property
    def topic(self) -> str:
        return f"persistent://public/default/{self.name}"


@dataclass(frozen=True)
class FaultSpec:
    name: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class Scenario:
    run: str
    topics: tuple[TopicSpec, ...]
    faults: tuple[FaultSpec, ...] = ()


@dataclass
class Window:
    kind: str
    topic: str
    client: str | None
    start: int
    end: int
    fault: str


@dataclass
class Expected:
    windows: list[Window] = field(default_factory=list)
    duplicates: Counter[tuple[str, str]] = field(default_factory=Counter)  # (subscription, kind)
    duplicate_uids: set[tuple[str, str, str]] = field(default_factory=set)  # (subscription, uid, kind)
    losses: set[tuple[str, str]] = field(default_factory=set)  # (subscription, uid)
    reorders: dict[str, set[str]] = field(default_factory=dict)  # scope -> uids
    max_gap_ms: dict[str, float] = field(default_factory=dict)  # fault -> longest gap
    events: int = 0


def ns(ms: float) -> int:
    return T0 + round(ms * MS)


def build(scenario: Scenario) -> tuple[list[dict[str, Any]], Expected]:
    """Every event of the scenario (unordered) and the answers."""
    events: list[dict[str, Any]] = []
    expected = Expected(reorders={"producer": set(), "key": set()})
    for spec in scenario.topics:
        _topic(scenario.run, spec, events, expected)
    expected.events = len(events)
    return events, expected


def digest(uid: str) -> str:
    """The digest of the payload a synthetic producer sends as ``uid``."""
    return payload_digest(uid.encode())


def _topic(run: str, spec: TopicSpec, events: list[dict[str, Any]], expected: Expected) -> None:
    version = 2 if spec.digests or any(c.sub_type for c in spec.consumers) else 1
    base = {"v": version, "run": run, "topic": spec.topic}
    sent = [ns(i * spec.interval_ms) for i in range(spec.messages)]
    acked = _release(sent, [s + round(PUBLISH_MS * MS) for s in sent], spec.stalls)
    producer = {**base, "client": spec.producer, "role": "producer", "cluster": spec.cluster}
    events.append({**producer, "ts": sent[0] - 10 * MS, "event": "connect"})
    for i, (s, a) in enumerate(zip(sent, acked, strict=True)):
        common = {"uid": f"{spec.producer}:{i}", "key": f"k{i % spec.keys}"}
        if spec.digests:
            common["digest"] = digest(common["uid"])
        events.append({**producer, **common, "ts": s, "event": "send"})
        ok = {**producer, **common, "ts": a, "event": "send_ok", "msg_id": f"1:{i}:-1:-1"}
        events.append({**ok, "latency_ms": (a - s) / MS})
    for consumer in spec.consumers:
        _consumer(base, spec, consumer, sent, acked, events, expected)
    successes = sorted(
        e["ts"] for e in events if e["topic"] == spec.topic and e["event"] in ("send_ok", "receive")
    )
    for stall in spec.stalls:
        first = next(i for i, s in enumerate(sent) if s >= ns(stall.start_ms))
        for kind, client in (("producer", spec.producer), ("topic", None)):
            expected.windows.append(
                Window(kind, spec.topic, client, sent[first], ns(stall.end_ms), stall.fault)
            )
        # the topic is silent from its last success before the first held send until the release
        last_success = max((t for t in successes if t < sent[first]), default=None)
        if last_success is not None:
            gap = (ns(stall.end_ms) - last_success) / MS
            expected.max_gap_ms[stall.fault] = max(expected.max_gap_ms.get(stall.fault, 0.0), gap)


def _release(due: list[int], times: list[int], stalls: tuple[Stall, ...]) -> list[int]:
    """Times, with those falling in a stall (judged by ``due``) held until its end."""
    out = list(times)
    for stall in stalls:
        held = [i for i, d in enumerate(due) if ns(stall.start_ms) <= d < ns(stall.end_ms)]
        for j, i in enumerate(held):
            out[i] = ns(stall.end_ms) + j * FLUSH_NS
    return out


def _consumer(
    base: dict[str, Any],
    spec: TopicSpec,
    c: ConsumerSpec,
    sent: list[int],
    acked: list[int],
    events: list[dict[str, Any]],
    expected: Expected,
) -> None:
    me = {**base, "client": c.client, "role": "consumer", "subscription": c.subscription}
    if c.sub_type is not None:
        me["sub_type"] = c.sub_type
    due = [a + round(DELIVER_MS * MS) for a in acked]
    received = _release(due, due, c.stalls)
    for i, j in c.swap:
        received[i], received[j] = received[j], received[i]
    last = spec.messages - 1 if c.stop_after is None else c.stop_after
    kept = [i for i in range(last + 1) if i not in c.lose]
    events.append({**me, "cluster": c.cluster, "ts": sent[0] - 5 * MS, "event": "connect"})

    def region(i: int) -> str:
        return c.switch_to if c.switch_at is not None and i >= c.switch_at else c.cluster

    def receive(i: int, ts: int, cluster: str) -> None:
        common = {**me, "cluster": cluster, "uid": f"{spec.producer}:{i}", "key": f"k{i % spec.keys}"}
        latency = (ts - sent[i]) / MS
        receipt = {**common, "ts": ts, "event": "receive", "latency_ms": latency, "msg_id": f"1:{i}:-1:-1"}
        if spec.digests:
            receipt |= {"digest": digest(common["uid"]), "redelivery": 0}
        events.append(receipt)
        events.append({**common, "ts": ts + round(ACK_MS * MS), "event": "ack", "msg_id": f"1:{i}:-1:-1"})

    for i in kept:
        receive(i, received[i], region(i))
    for i in c.redeliver:
        receive(i, received[i] + MS, region(i))
        expected.duplicates[(c.subscription, "same_region")] += 1
        expected.duplicate_uids.add((c.subscription, f"{spec.producer}:{i}", "same_region"))
    if c.switch_at is not None:
        switched = received[c.switch_at] - MS
        events.append({**me, "cluster": c.switch_to, "ts": switched, "event": "switch_cluster"})
        for n, i in enumerate(c.failover_dups, start=1):
            receive(i, switched + n * 50_000, c.switch_to)
            expected.duplicates[(c.subscription, "cross_region")] += 1
            expected.duplicate_uids.add((c.subscription, f"{spec.producer}:{i}", "cross_region"))
    if c.stop_after is not None:
        events.append({**me, "cluster": region(last), "ts": received[last] + MS, "event": "disconnect"})
    else:
        expected.losses |= {(c.subscription, f"{spec.producer}:{i}") for i in c.lose}
    for stall in c.stalls:
        first = next(i for i, d in enumerate(due) if d >= ns(stall.start_ms))
        expected.windows.append(
            Window("consumer", spec.topic, c.client, acked[first], ns(stall.end_ms), stall.fault)
        )
    _reorders(spec, c, kept, received, expected)


def _reorders(
    spec: TopicSpec, c: ConsumerSpec, kept: list[int], received: list[int], expected: Expected
) -> None:
    """The reference answer, straight from the definition: in receipt order, a seq lower than the
    highest seen before it (from the producer, or from the producer with the same key)."""
    highest: dict[str, int] = {}
    for i in sorted(kept, key=lambda i: (received[i], i)):
        for scope, group in (("producer", "*"), ("key", f"k{i % spec.keys}")):
            if highest.get(group, -1) > i:
                expected.reorders[scope].add(f"{spec.producer}:{i}")
            highest[group] = max(highest.get(group, -1), i)


def journal(scenario: Scenario, first_ts: int, last_ts: int) -> dict[str, Any]:
    """A Chaos Toolkit journal: the workload's start and stop around the faults."""

    def iso(ts: int) -> str:
        return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ts // 1000)).isoformat()

    def activity(name: str, module: str, start: int, end: int) -> dict[str, Any]:
        return {
            "activity": {
                "type": "action",
                "name": name,
                "provider": {"type": "python", "module": module, "func": name.replace("-", "_")},
            },
            "output": None,
            "status": "succeeded",
            "start": iso(start),
            "end": iso(end),
            "duration": (end - start) / 1e9,
        }

    runs = [activity("start-workload", WORKLOAD_ACTIONS_MODULE, first_ts - 100 * MS, first_ts)]
    runs += [activity(f.name, FAULT_MODULE, ns(f.start_ms), ns(f.end_ms)) for f in scenario.faults]
    runs.append(activity("stop-workload", WORKLOAD_ACTIONS_MODULE, last_ts, last_ts + 100 * MS))
    return {
        "chaoslib-version": "1.42.0",
        "experiment": {"title": scenario.run},
        "start": iso(first_ts - 200 * MS),
        "end": iso(last_ts + 200 * MS),
        "status": "completed",
        "deviated": False,
        "steady_states": {"before": {"steady_state_met": True, "probes": []}, "after": None},
        "run": runs,
        "rollbacks": [],
    }


def write(scenario: Scenario, run_dir: Path, *, files: int = 0, shuffle: int | None = None) -> Expected:
    """Write the run: one log per client (``files=0``) or the events dealt over ``files`` logs;
    lines in time order, or shuffled with seed ``shuffle``."""
    events, expected = build(scenario)
    write_events(scenario, events, run_dir, files=files, shuffle=shuffle)
    return expected


def write_events(
    scenario: Scenario,
    events: list[dict[str, Any]],
    run_dir: Path,
    *,
    files: int = 0,
    shuffle: int | None = None,
) -> None:
    """Write ``events`` (the scenario's, perhaps changed) and the scenario's journal as a run."""
    events = list(events)
    events.sort(key=lambda e: (e["ts"], e["client"], e["event"]))
    if shuffle is not None:
        random.Random(shuffle).shuffle(events)
    logs: dict[str, list[str]] = {}
    for n, event in enumerate(events):
        name = event["client"] if files == 0 else f"part-{n % files}"
        logs.setdefault(name, []).append(json.dumps(event, separators=(",", ":")))
    (run_dir / Layout.EVENTS).mkdir(parents=True, exist_ok=True)
    for name, lines in logs.items():
        Layout.event_log(run_dir, name).write_text("\n".join(lines) + "\n")
    times = [e["ts"] for e in events]
    (run_dir / Layout.JOURNAL).write_text(json.dumps(journal(scenario, min(times), max(times)), indent=1))
