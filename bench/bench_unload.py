"""Disruption windows of bundle moves, with the official client (issue 4).

    .venv/bin/python bench/bench_unload.py
    .venv/bin/python bench/bench_unload.py --rate 1000 --topics 8

Three brokers, two bookies and ZooKeeper as processes on loopback (``magnetar local``). For each
move, a namespace with one bundle holds ``--topics`` topics; producers send ``--rate`` msg/s in
total (no batching) and a consumer per topic receives. The bundle is then (a) unloaded, (b)
transferred to another broker, or (c) its owner gets SIGTERM (which transfers everything first).
The disruption window of a producer is the longest gap between successive send receipts around
the move; of a consumer, the longest gap between successive receives. A first row measures the
same with nothing moved: the floor that the machine itself sets.
Targets: (b) and (c) p99 <= 20 ms and max <= 50 ms; (a) shows the client-backoff windows that
Pulsar's unload causes. Prints a table and writes bench/results/bench_unload.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulsar
from rich.console import Console
from rich.table import Table

from magnetar.chaos.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.chaos.local.supervisor import ClusterState, Supervisor, alive
from magnetar.common.admin_client import AdminClient

console = Console()
RESULTS = Path(__file__).parent / "results" / "bench_unload.json"
_LOG = logging.getLogger("pulsar-bench")
_LOG.setLevel(logging.WARNING)


def admin(base: str, method: str, path: str, body: Any = None) -> Any:
    return AdminClient(base).call(method, path, body)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def longest_gap(times: list[float], start: float, end: float) -> float:
    inside = sorted(t for t in times if start <= t <= end)
    return max((b - a for a, b in itertools.pairwise(inside)), default=end - start) * 1000


@dataclass
class BrokerRef:
    """A broker as a move sees it: Magnetar's from ``magnetar local``, Apache Pulsar's alike."""

    name: str
    service_url: str
    #: what ``destinationBroker`` names it by
    broker_id: str
    pid: int


def magnetar_brokers(state: ClusterState) -> list[BrokerRef]:
    return [BrokerRef(b.name, b.endpoints["service_url"], b.address, b.pid) for b in state.find("broker")]


def service_url(brokers: list[BrokerRef]) -> str:
    """Every broker, as clients are configured in production: lookups go on while one stops."""
    return "pulsar://" + ",".join(b.service_url.removeprefix("pulsar://") for b in brokers)


def measure(
    base: str, service_url: str, brokers: list[BrokerRef], mode: str, topics: int, rate: float
) -> dict[str, Any]:
    """One move (``unload``, ``transfer`` or ``sigterm`` of the owner; ``none``: nothing moved)
    under load, through the admin REST at ``base``: the longest gap per producer and per
    consumer around it."""
    namespace = f"public/bench-{mode}-{time.time_ns() % 10**6}"
    admin(base, "PUT", f"/admin/v2/namespaces/{namespace}", {"bundles": {"numBundles": 1}})
    names = [f"persistent://{namespace}/t{i}" for i in range(topics)]
    client = pulsar.Client(service_url, operation_timeout_seconds=30, logger=_LOG)
    receipts: dict[int, list[float]] = {i: [] for i in range(topics)}
    receives: dict[int, list[float]] = {i: [] for i in range(topics)}

    def listener(index: int) -> Any:
        def on_message(consumer: pulsar.Consumer, message: pulsar.Message) -> None:
            receives[index].append(time.monotonic())
            consumer.acknowledge(message)

        return on_message

    for index, name in enumerate(names):
        client.subscribe(name, "bench", message_listener=listener(index))
    producers = [client.create_producer(n, batching_enabled=False, send_timeout_millis=60_000) for n in names]
    stop = threading.Event()

    def produce() -> None:
        interval, sequence = 1.0 / rate, 0
        next_send = time.monotonic()
        while not stop.is_set():
            index = sequence % topics
            producers[index].send_async(
                b"x" * 256, lambda _r, _m, i=index: receipts[i].append(time.monotonic())
            )
            sequence += 1
            next_send += interval
            time.sleep(max(0.0, next_send - time.monotonic()))

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    time.sleep(3)
    bundle = admin(base, "GET", f"/admin/v2/namespaces/{namespace}/bundles")
    bundle_name = f"{bundle['boundaries'][0]}_{bundle['boundaries'][1]}"
    owner_url = admin(base, "GET", f"/lookup/v2/topic/persistent/{names[0].removeprefix('persistent://')}")[
        "brokerUrl"
    ]
    owner = next(b for b in brokers if b.service_url == owner_url)
    moved_at = time.monotonic()
    if mode == "none":
        pass  # the baseline: the same windows with nothing moved
    elif mode == "unload":
        admin(base, "PUT", f"/admin/v2/namespaces/{namespace}/{bundle_name}/unload")
    elif mode == "transfer":
        other = next(b for b in brokers if b is not owner)
        admin(
            base,
            "PUT",
            f"/admin/v2/namespaces/{namespace}/{bundle_name}/unload?destinationBroker={other.broker_id}",
        )
    else:
        os.kill(owner.pid, signal.SIGTERM)
    time.sleep(5)
    stop.set()
    thread.join()
    for producer in producers:
        producer.flush()
    time.sleep(1)
    client.close()
    window = (moved_at - 1, moved_at + 4)
    producer_windows = [longest_gap(receipts[i], *window) for i in range(topics)]
    consumer_windows = [longest_gap(receives[i], *window) for i in range(topics)]
    return {
        "mode": mode,
        "owner": owner.name,
        "producer_p50_ms": percentile(producer_windows, 0.5),
        "producer_p99_ms": percentile(producer_windows, 0.99),
        "producer_max_ms": max(producer_windows),
        "consumer_p50_ms": percentile(consumer_windows, 0.5),
        "consumer_p99_ms": percentile(consumer_windows, 0.99),
        "consumer_max_ms": max(consumer_windows),
    }


#: "none" first: the longest gaps of the same workload with nothing moved, the floor the
#: machine itself sets (scheduling on shared cores, bookie fsyncs)
MODES = ("none", "unload", "transfer", "sigterm")


def cluster_spec(name: str, *, brokers: int) -> ClusterSpec:
    """One region: two bookies (E/Qw/Qa 2/2/2) and ``brokers`` brokers whose sessions expire in 5 s."""
    return ClusterSpec(
        name=name,
        regions=[
            RegionSpec(
                name="bench",
                bookies=2,
                brokers=brokers,
                ledger=LedgerSpec(),
                broker_settings={"metadata_store_session_timeout_millis": 5000},
            )
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=2000, help="messages/s over all topics (default 2000)")
    parser.add_argument("--topics", type=int, default=16, help="topics in the bundle (default 16)")
    args = parser.parse_args()
    spec = cluster_spec("bench-unload", brokers=3)
    rows = []
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-", dir=os.environ.get("BENCH_DIR")) as tmp:
        supervisor = Supervisor(Path(tmp) / "cluster", on_status=lambda m: console.print(f"[dim]{m}[/]"))
        supervisor.up(spec)
        try:
            for mode in MODES:
                console.print(f"[bold]{mode}[/] at {args.rate:,.0f} msg/s over {args.topics} topics …")
                state = ClusterState.load(Path(tmp) / "cluster")
                brokers = magnetar_brokers(state)
                base = state.find("broker")[0].endpoints["web_service_url"]
                rows.append(measure(base, service_url(brokers), brokers, mode, args.topics, args.rate))
                for record in ClusterState.load(Path(tmp) / "cluster").find("broker"):
                    if not alive(record.pid):
                        supervisor.restart(record.name)
        finally:
            supervisor.down()
    table = Table(
        title=f"disruption windows of bundle moves ({args.rate:,.0f} msg/s, {args.topics} topics, ms)"
    )
    for column in (
        "move",
        "producer p50",
        "producer p99",
        "producer max",
        "consumer p50",
        "consumer p99",
        "consumer max",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["mode"],
            *(
                f"{r[k]:.1f}"
                for k in (
                    "producer_p50_ms",
                    "producer_p99_ms",
                    "producer_max_ms",
                    "consumer_p50_ms",
                    "consumer_p99_ms",
                    "consumer_max_ms",
                )
            ),
        )
    console.print(table)
    console.print("targets: transfer and sigterm p99 <= 20 ms and max <= 50 ms; unload shows client backoff")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rate": args.rate, "topics": args.topics, "rows": rows}, indent=2))
    console.print(f"results: {RESULTS}")


if __name__ == "__main__":
    main()
