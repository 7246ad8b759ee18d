"""Read-only broker pool (PIP-63, issue 8): latency on read-only brokers and the writable
broker's outbound bytes before and after moving subscriptions to the pool.

    .venv/bin/python bench/bench_readonly.py
    .venv/bin/python bench/bench_readonly.py --subscriptions 50 --move 25 --rate 2000 --duration 20

One writable and two read-only brokers, two bookies and ZooKeeper as processes on loopback
(``magnetar local``). One producer sends ``--size`` byte messages at ``--rate`` msg/s (batched, as
Pulsar's client does by default) to one topic read by ``--subscriptions`` subscriptions (one
Exclusive consumer each). Phase "before": every subscription on the writable broker. Phase
"after": ``--move`` of them are closed and reopened (same subscription names, so the cursors carry
over) through the read-only pool's service URL. End-to-end latency is receive time minus the
producer's publish timestamp; outbound bytes are the writable broker's dispatched bytes
(``pulsar_out_bytes`` on its /metrics) per second of each phase.
Targets: outbound after / before = (subscriptions - moved) / subscriptions (it falls in
proportion to the subscriptions moved); read-only p99 <= 2 x writable p99.
Prints a table and writes JSON (``--out``, default runs/bench_readonly.json).

The issue's full load (50 subscriptions of 2,000 msg/s: 100,000 messages/s delivered to consumers
in this one Python process) saturates a small shared host: every consumer falls behind and the
latencies measure queueing, not the brokers. Keep ``subscriptions x rate`` within what the host
delivers (e.g. ``--subscriptions 50 --rate 40``) and say so beside the figures. Read-only
consumers see an entry once the next one (or the writer's explicit LAC,
``bookkeeper_explicit_lac_interval_in_mills``) tells the bookies it is confirmed: at low rates
that interval is the read-only latency's floor.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pulsar
from rich.console import Console
from rich.table import Table

from magnetar.chaos.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.chaos.local.supervisor import ClusterState, ProcessRecord, Supervisor

console = Console()
_LOG = logging.getLogger("pulsar-bench")
_LOG.setLevel(logging.WARNING)
TOPIC = "persistent://public/default/bench-readonly"
#: cumulative ack every this many messages (acks are not what is measured)
ACK_EVERY = 200


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def out_bytes(broker: ProcessRecord) -> float:
    """Bytes the broker has dispatched to consumers (sum of pulsar_out_bytes over its topics)."""
    with urllib.request.urlopen(broker.endpoints["web_service_url"] + "/metrics", timeout=30) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("pulsar_out_bytes")
    )


class Subscriber:
    """One subscription's consumer; records end-to-end latencies while ``recording``."""

    def __init__(self, client: pulsar.Client, name: str) -> None:
        self.name = name
        self.latencies_ms: list[float] = []
        self.recording = False
        self._count = 0
        self.consumer = client.subscribe(
            TOPIC,
            name,
            consumer_type=pulsar.ConsumerType.Exclusive,
            initial_position=pulsar.InitialPosition.Latest,
            message_listener=self._on_message,
            receiver_queue_size=5000,
        )

    def _on_message(self, consumer: pulsar.Consumer, message: pulsar.Message) -> None:
        if self.recording:
            self.latencies_ms.append(time.time() * 1000 - message.publish_timestamp())
        self._count += 1
        if self._count % ACK_EVERY == 0:
            with contextlib.suppress(pulsar.PulsarException):
                consumer.acknowledge_cumulative(message)

    def close(self) -> None:
        self.consumer.close()


def produce(client: pulsar.Client, rate: float, size: int, stop: threading.Event) -> None:
    producer = client.create_producer(TOPIC, batching_max_publish_delay_ms=5, block_if_queue_full=True)
    payload = os.urandom(size)
    interval = 1 / rate
    next_send = time.monotonic()
    while not stop.is_set():
        producer.send_async(payload, None)
        next_send += interval
        delay = next_send - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    producer.flush()
    producer.close()


def phase(subscribers: list[Subscriber], writable: ProcessRecord, duration: float) -> dict[str, Any]:
    for s in subscribers:
        s.latencies_ms = []
        s.recording = True
    before, start = out_bytes(writable), time.monotonic()
    time.sleep(duration)
    after, end = out_bytes(writable), time.monotonic()
    for s in subscribers:
        s.recording = False
    return {"outbound_bytes_per_s": (after - before) / (end - start)}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--subscriptions", type=int, default=50, help="subscriptions (default 50)")
    parser.add_argument("--move", type=int, default=25, help="subscriptions moved to the pool (default 25)")
    parser.add_argument("--rate", type=float, default=2000, help="messages/s produced (default 2000)")
    parser.add_argument("--size", type=int, default=1024, help="message size in bytes (default 1024)")
    parser.add_argument("--duration", type=float, default=20, help="seconds measured per phase (default 20)")
    parser.add_argument("--warmup", type=float, default=5, help="seconds before each phase (default 5)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_readonly.json"), help="JSON results")
    args = parser.parse_args()
    if not 0 < args.move <= args.subscriptions:
        parser.error("--move must be between 1 and --subscriptions")
    spec = ClusterSpec(
        name="bench-readonly",
        regions=[
            RegionSpec(
                name="bench",
                bookies=2,
                brokers=1,
                read_only_brokers=2,
                ledger=LedgerSpec(),
                broker_settings={"bookkeeper_explicit_lac_interval_in_mills": 100},
            )
        ],
    )
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-", dir=os.environ.get("BENCH_DIR")) as tmp:
        directory = Path(tmp) / "cluster"
        supervisor = Supervisor(directory, on_status=lambda m: console.print(f"[dim]{m}[/]"))
        supervisor.up(spec)
        try:
            result = run(ClusterState.load(directory), args)
        finally:
            supervisor.down()
    report(result, args)
    return 0


def run(state: ClusterState, args: argparse.Namespace) -> dict[str, Any]:
    brokers = state.find("broker")
    writable = next(b for b in brokers if "read-only" not in b.name)
    pool = ",".join(
        b.endpoints["service_url"].removeprefix("pulsar://") for b in brokers if "read-only" in b.name
    )
    writable_client = pulsar.Client(
        writable.endpoints["service_url"], operation_timeout_seconds=60, logger=_LOG
    )
    pool_client = pulsar.Client(f"pulsar://{pool}", operation_timeout_seconds=60, logger=_LOG)
    subscribers = [Subscriber(writable_client, f"sub-{i}") for i in range(args.subscriptions)]
    stop = threading.Event()
    producer = threading.Thread(
        target=produce, args=(writable_client, args.rate, args.size, stop), daemon=True
    )
    producer.start()
    try:
        console.print(f"before: {args.subscriptions} subscriptions on the writable broker …")
        time.sleep(args.warmup)
        before = phase(subscribers, writable, args.duration)
        before["writable_ms"] = [x for s in subscribers for x in s.latencies_ms]
        moved = subscribers[: args.move]
        for s in moved:
            s.close()
        moved = [Subscriber(pool_client, s.name) for s in moved]
        staying = subscribers[args.move :]
        console.print(f"after: {args.move} subscriptions moved to the read-only pool …")
        time.sleep(args.warmup)
        after = phase(moved + staying, writable, args.duration)
        after["writable_ms"] = [x for s in staying for x in s.latencies_ms]
        after["read_only_ms"] = [x for s in moved for x in s.latencies_ms]
    finally:
        stop.set()
        producer.join(30)
        writable_client.close()
        pool_client.close()
    return {"before": before, "after": after}


def report(result: dict[str, Any], args: argparse.Namespace) -> None:
    before, after = result["before"], result["after"]
    ratio = (
        after["outbound_bytes_per_s"] / before["outbound_bytes_per_s"]
        if before["outbound_bytes_per_s"]
        else 0
    )
    expected = (args.subscriptions - args.move) / args.subscriptions
    samples = {
        "writable, before": before["writable_ms"],
        "writable, after": after["writable_ms"],
        "read-only, after": after["read_only_ms"],
    }
    latency = {
        k: {"p50": percentile(v, 0.5), "p99": percentile(v, 0.99), "n": len(v)} for k, v in samples.items()
    }
    # Against the writable consumers of the same phase (those of "before" when all were moved).
    reference = "writable, after" if after["writable_ms"] else "writable, before"
    p99_ratio = latency["read-only, after"]["p99"] / latency[reference]["p99"]
    table = Table(
        title=f"read-only pool: {args.subscriptions} subscriptions, {args.move} moved, "
        f"{args.size} B at {args.rate:,.0f} msg/s"
    )
    for column in ("measure", "value", "target", "met"):
        table.add_column(column, justify="right")
    mb = 1024 * 1024
    table.add_row("writable outbound before (MiB/s)", f"{before['outbound_bytes_per_s'] / mb:.2f}", "", "")
    table.add_row("writable outbound after (MiB/s)", f"{after['outbound_bytes_per_s'] / mb:.2f}", "", "")
    table.add_row(
        "outbound after / before",
        f"{ratio:.2f}",
        f"{expected:.2f} ± 0.10",
        _met(abs(ratio - expected) <= 0.10),
    )
    for name, figures in latency.items():
        table.add_row(f"latency p50 {name} (ms)", f"{figures['p50']:.1f}", "", f"n={figures['n']}")
        table.add_row(f"latency p99 {name} (ms)", f"{figures['p99']:.1f}", "", "")
    table.add_row("read-only p99 / writable p99", f"{p99_ratio:.2f}", "<= 2.00", _met(p99_ratio <= 2.0))
    console.print(table)
    doc = {
        "subscriptions": args.subscriptions,
        "moved": args.move,
        "rate": args.rate,
        "size": args.size,
        "duration_s": args.duration,
        "outbound_before_bytes_per_s": before["outbound_bytes_per_s"],
        "outbound_after_bytes_per_s": after["outbound_bytes_per_s"],
        "outbound_ratio": ratio,
        "outbound_ratio_target": expected,
        "latency_ms": latency,
        "read_only_p99_over_writable_p99": p99_ratio,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2))
    console.print(f"results: {args.out}")


def _met(ok: bool) -> str:
    return "[green]yes[/]" if ok else "[red]no[/]"


if __name__ == "__main__":
    sys.exit(main())
