"""Run a workload: start the producers and consumers, stop on time or on SIGTERM, let the
consumers drain what was published, and write the counters beside the event log."""

from __future__ import annotations

import json
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from magnetar.chaos.workload.clients import (
    DEFAULT_TICK_S,
    ConsumerSettings,
    ConsumerWorker,
    Endpoint,
    ProducerSettings,
    ProducerWorker,
)
from magnetar.chaos.workload.events import EventLog
from magnetar.common.run_directory import Layout


@dataclass
class WorkloadSpec:
    run_dir: Path
    run_id: str
    prefix: str
    home: Endpoint
    topic: str
    producers: int = 1
    consumers: int = 1
    subscription: str = "chaos"
    subscription_type: str = "Shared"
    rate: float = 100.0
    size: int = 256
    keys: int = 16
    batching: bool = False
    #: producers send what is due at most this often (clients.DEFAULT_TICK_S; 0: each message alone)
    tick_s: float = DEFAULT_TICK_S
    duration_s: float = 60.0
    drain_s: float = 30.0
    replicate_subscription_state: bool = False
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    #: partitions of the topic, created through ``admin_url`` before the clients start (0: the
    #: topic is left as it is: non-partitioned unless someone made it partitioned)
    partitions: int = 0
    admin_url: str | None = None


def create_partitioned_topic(admin_url: str, topic: str, partitions: int, home: Endpoint) -> None:
    """Create ``topic`` with ``partitions`` partitions (one that exists already is kept as it is),
    with the credentials and trusted CAs of the home cluster's clients."""
    # Imported here, for partitioned workloads only: the admin client's HTTP stack is about a
    # second of the workload's start, which every experiment waits for before its fault.
    from magnetar.admin.client import AdminClient, AdminError
    from magnetar.common.tls import client_context

    path = "/admin/v2/" + topic.replace("://", "/", 1) + "/partitions"
    credentials = home.credentials
    tls = client_context(home.trust_certs, certificate=credentials.tls_certificate, key=credentials.tls_key)
    try:
        AdminClient(admin_url, credentials=credentials, tls=tls).call("PUT", path, partitions)
    except AdminError as exc:
        if exc.status != 409:
            raise


def run(spec: WorkloadSpec, on_status: Any = print) -> dict[str, Any]:
    if spec.partitions:
        if spec.admin_url is None:
            raise ValueError("a partitioned workload needs the admin URL to create its topic")
        create_partitioned_topic(spec.admin_url, spec.topic, spec.partitions, spec.home)
    events_dir = spec.run_dir / Layout.EVENTS
    endpoints = {spec.home.cluster: spec.home, **spec.endpoints}
    consumers = [
        ConsumerWorker(
            f"{spec.prefix}-c{i}",
            spec.home,
            ConsumerSettings(
                spec.topic,
                spec.subscription,
                spec.subscription_type,
                spec.replicate_subscription_state,
                Layout.control(spec.run_dir, f"{spec.prefix}-c{i}"),
                endpoints,
            ),
            EventLog(
                events_dir,
                spec.run_id,
                f"{spec.prefix}-c{i}",
                "consumer",
                spec.topic,
                sub_type=spec.subscription_type,
            ),
        )
        for i in range(spec.consumers)
    ]
    producers = [
        ProducerWorker(
            f"{spec.prefix}-p{i}",
            spec.home,
            ProducerSettings(spec.topic, spec.rate, spec.size, spec.keys, spec.batching, spec.tick_s),
            EventLog(events_dir, spec.run_id, f"{spec.prefix}-p{i}", "producer", spec.topic),
        )
        for i in range(spec.producers)
    ]
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        for worker in [*consumers, *producers]:
            worker.start()
        on_status(f"workload {spec.prefix}: {len(producers)} producers at {spec.rate:g}/s each")
        stop.wait(spec.duration_s)
        _stop(producers, consumers, spec.drain_s, on_status)
    finally:
        signal.signal(signal.SIGTERM, previous)
    logs = [w.events for w in producers] + [w.events for w in consumers]
    counters = {events.path.stem: dict(events.counts) for events in logs}
    for events in logs:
        events.close()
    out = Layout.workload(spec.run_dir, spec.prefix, ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"prefix": spec.prefix, "topic": spec.topic, "counters": counters}, indent=2))
    return counters


def _stop(
    producers: list[ProducerWorker], consumers: list[ConsumerWorker], drain_s: float, on_status: Any
) -> None:
    """Producers first, then the consumers once they drained. Each step says when it ended: a
    stop that outlasts its caller's patience shows where it waited."""
    began = time.monotonic()

    def say(step: str, workers: list[Any], detail: str = "") -> None:
        stuck = ", ".join(w.client_id for w in workers if w.is_alive())
        on_status(f"stopping: {step} after {time.monotonic() - began:.1f} s{detail}"
                  + (f" (still closing: {stuck})" if stuck else ""))  # fmt: skip

    for producer in producers:
        producer.stopping.set()
    for producer in producers:
        producer.join(60)
    say("producers done", producers)
    _drain(consumers, producers, drain_s)
    received = sum(c.events.counts["receive"] for c in consumers)
    acked = sum(p.events.counts["send_ok"] for p in producers)
    say("drained", [], f" ({received} received, {acked} acknowledged)")
    for consumer in consumers:
        consumer.stopping.set()
    for consumer in consumers:
        consumer.join(30)
    say("consumers closed", consumers)


def _drain(consumers: list[ConsumerWorker], producers: list[ProducerWorker], drain_s: float) -> None:
    """Give consumers until every acknowledged send was received (counted by events), or until
    nothing arrived for a few seconds, or ``drain_s``, whichever comes first."""
    if not consumers:
        return
    acked = sum(p.events.counts["send_ok"] for p in producers)
    deadline = time.monotonic() + drain_s
    while time.monotonic() < deadline:
        received = sum(c.events.counts["receive"] for c in consumers)
        quiet = min(time.monotonic() - c.last_receive for c in consumers)
        if received >= acked and quiet > 1.0:
            return
        if quiet > 5.0:
            return
        time.sleep(0.2)
