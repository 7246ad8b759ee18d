"""Big synthetic runs for the benchmark, written fast: plain string templates, one process per
topic. Each message is four events (send, send_ok, receive, ack); every topic's producer stalls
for 300 ms after each of the two faults (one producer and one topic window each), and every
``DUP_EVERY``-th message is received twice.
"""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from magnetar.common.run_directory import Layout
from magnetar.spark.synthetic import MS, T0, FaultSpec, Scenario, journal

SPACING_NS = 200_000  # 5,000 messages/s per topic
CHUNK = 50_000
DUP_EVERY = 10_000
STALL_NS = 300 * MS


def fault_times(messages: int) -> list[int]:
    return [T0 + messages * SPACING_NS * k // 3 for k in (1, 2)]


def _topic(run_dir: Path, run: str, topic: int, messages: int) -> None:
    name = f"persistent://public/default/bench-{topic}"
    producer, consumer = f"p{topic}", f"c{topic}"
    stalls = fault_times(messages)
    base_p = f'"v":1,"run":"{run}","client":"{producer}","role":"producer","topic":"{name}","cluster":"east"'
    base_c = (
        f'"v":1,"run":"{run}","client":"{consumer}","role":"consumer","topic":"{name}","cluster":"east",'
        f'"subscription":"sub"'
    )
    with (
        Layout.event_log(run_dir, producer).open("w") as out_p,
        Layout.event_log(run_dir, consumer).open("w") as out_c,
    ):
        for first in range(0, messages, CHUNK):
            lines_p: list[str] = []
            lines_c: list[str] = []
            for i in range(first, min(first + CHUNK, messages)):
                sent = T0 + i * SPACING_NS
                acked = sent + 2 * MS
                for stall in stalls:
                    if stall <= sent < stall + STALL_NS:
                        acked = stall + STALL_NS + (sent - stall) // 100
                got = acked + 2 * MS
                uid = f'"uid":"{producer}:{i}","key":"k{i % 16}"'
                mid = f'"msg_id":"7:{i}:-1:-1"'
                lines_p.append(f'{{"ts":{sent},{base_p},"event":"send",{uid}}}')
                publish_ms = (acked - sent) / MS
                lines_p.append(
                    f'{{"ts":{acked},{base_p},"event":"send_ok",{uid},{mid},"latency_ms":{publish_ms}}}'
                )
                lines_c.append(
                    f'{{"ts":{got},{base_c},"event":"receive",{uid},{mid},"latency_ms":{(got - sent) / MS}}}'
                )
                lines_c.append(f'{{"ts":{got + 200_000},{base_c},"event":"ack",{uid},{mid}}}')
                if i % DUP_EVERY == DUP_EVERY - 1:
                    lines_c.append(
                        f'{{"ts":{got + 50_000},{base_c},"event":"receive",{uid},{mid},"latency_ms":2.0}}'
                    )
            out_p.write("\n".join(lines_p) + "\n")
            out_c.write("\n".join(lines_c) + "\n")


def write(run_dir: Path, events: int, topics: int = 4, workers: int = 2) -> int:
    """A run of about ``events`` events over ``topics`` topics; the exact number of events."""
    messages = max(1, events // (4 * topics))
    (run_dir / Layout.EVENTS).mkdir(parents=True, exist_ok=True)
    run = run_dir.name
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_topic, [run_dir] * topics, [run] * topics, range(topics), [messages] * topics))
    faults = tuple(
        FaultSpec(f"unload-{n}", (t - T0) / MS, (t - T0) / MS + 50)
        for n, t in enumerate(fault_times(messages), 1)
    )
    last = T0 + messages * SPACING_NS + 5 * MS
    text = json.dumps(journal(Scenario(run, (), faults), T0, last), indent=1)
    (run_dir / Layout.JOURNAL).write_text(text)
    return topics * (messages * 4 + messages // DUP_EVERY)
