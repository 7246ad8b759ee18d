"""Throughput of one 8-partition topic over three brokers against one non-partitioned topic,
with the side-by-side benchmark's load generator: pulsar-perf-go, a process of its own.

    .venv/bin/python bench/bench_partitioned.py
    .venv/bin/python bench/bench_partitioned.py --partitions 8 --seconds 40 --no-batching

Three brokers and two bookies (E/Qw/Qa 2/2/2) with ZooKeeper as processes on loopback
(``magnetar local``). The namespace has 16 bundles, so the partitions spread over the brokers. A
first row publishes at 1,000 msg/s to show the floor (latency with no pressure); then each topic is
published to as fast as the tool goes (it fails on any failed send). Target: the partitioned
topic takes at least twice what the single one does. Prints a table and writes
bench/results/bench_partitioned.json, with each topic's owners, the cores each broker and bookie
kept busy, and the machine's CPU count (the figures that say where it stops).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench_unload import cluster_spec  # beside this script
from common import cpu_seconds, machine_ticks
from perf_go import produce
from rich.console import Console
from rich.table import Table

from magnetar.admin.client import AdminClient
from magnetar.local.supervisor import ClusterState, Supervisor

console = Console(width=150)
RESULTS = Path(__file__).parent / "results" / "bench_partitioned.json"
CPUS = os.cpu_count() or 1
NAMESPACE = "public/bench-partitioned"


def owners(admin: AdminClient, topic: str, partitions: int) -> list[str]:
    names = [f"{topic}-partition-{i}" for i in range(partitions)] if partitions else [topic]
    return sorted(
        {admin.call("GET", f"/lookup/v2/topic/{n.replace('://', '/', 1)}")["brokerUrl"] for n in names}
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument(
        "--seconds", type=float, default=40, help="per row (intervals are 10 s; the first is warm-up)"
    )
    parser.add_argument("--batching", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-", dir=os.environ.get("BENCH_DIR")) as tmp:
        supervisor = Supervisor(Path(tmp) / "cluster", on_status=lambda m: console.print(f"[dim]{m}[/]"))
        supervisor.up(cluster_spec("bench-partitioned", brokers=3))
        try:
            brokers = ClusterState.load(Path(tmp) / "cluster").find("broker")
            admin = AdminClient(brokers[0].endpoints["web_service_url"])
            admin.call("PUT", f"/admin/v2/namespaces/{NAMESPACE}", {"bundles": {"numBundles": 16}})
            url = "pulsar://" + ",".join(
                b.endpoints["service_url"].removeprefix("pulsar://") for b in brokers
            )
            stamp = time.time_ns() % 10**6
            single = f"persistent://{NAMESPACE}/single-{stamp}"
            parted = f"persistent://{NAMESPACE}/parted-{stamp}"
            admin.call("PUT", f"/admin/v2/{parted.replace('://', '/', 1)}/partitions", args.partitions)
            plan = [
                ("floor: 1,000/s", f"persistent://{NAMESPACE}/floor-{stamp}", 0, 1000),
                ("1 topic, max", single, 0, 0),
                (f"{args.partitions} partitions, max", parted, args.partitions, 0),
            ]
            state = ClusterState.load(Path(tmp) / "cluster")
            processes = {r.name: r.pid for r in [*state.find("broker"), *state.find("bookie")]}
            for label, topic, partitions, rate in plan:
                console.print(f"[bold]{label}[/] …")
                before, started = {n: cpu_seconds(p) for n, p in processes.items()}, time.monotonic()
                ticks = machine_ticks()
                figures = produce(url, topic, rate=rate, seconds=args.seconds, batching=args.batching)
                elapsed = time.monotonic() - started
                busy, iowait, total = (b - a for a, b in zip(ticks, machine_ticks(), strict=True))
                machine = {"busy": round(busy / total * CPUS, 2), "iowait": round(iowait / total * CPUS, 2)}
                # cores each broker and bookie kept busy over the row (1.0: one core all along)
                cores = {n: round((cpu_seconds(p) - before[n]) / elapsed, 2) for n, p in processes.items()}
                rows.append({"row": label, "partitions": partitions, "rate_asked": rate, "cores": cores,
                             "machine_cores": machine,
                             "owners": owners(admin, topic, partitions), **figures.as_dict()})  # fmt: skip
        finally:
            supervisor.down()
    table = Table(title=f"publish throughput, {'batched' if args.batching else 'unbatched'} 1 KiB messages")
    columns = ("row", "msg/s", "p50 ms", "p99 ms", "owners", "brokers", "bookies", "machine", "iowait")
    for column in columns:
        table.add_column(column, justify="right")
    for r in rows:
        brokers_busy = sum(v for n, v in r["cores"].items() if "broker" in n)
        bookies_busy = sum(v for n, v in r["cores"].items() if "bookie" in n)
        table.add_row(r["row"], f"{r['msgs_per_s']:,.0f}", f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}",
                      str(len(r["owners"])), f"{brokers_busy:.2f}", f"{bookies_busy:.2f}",
                      f"{r['machine_cores']['busy']:.2f}", f"{r['machine_cores']['iowait']:.2f}")  # fmt: skip
    console.print("brokers, bookies, machine, iowait: cores kept busy over the row (all processes)")
    console.print(table)
    ratio = rows[2]["msgs_per_s"] / max(1.0, rows[1]["msgs_per_s"])
    console.print(f"partitioned / single: {ratio:.2f}x (target >= 2x) on {os.cpu_count()} CPUs")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"cpus": os.cpu_count(), "batching": args.batching, "ratio": ratio,
                                   "rows": rows}, indent=2))  # fmt: skip
    console.print(f"results: {RESULTS}")


if __name__ == "__main__":
    main()
