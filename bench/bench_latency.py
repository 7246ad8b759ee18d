"""Where a publish's time goes: the client, the broker, the two bookies, the fsync.

    .venv/bin/python bench/bench_latency.py
    .venv/bin/python bench/bench_latency.py --rate 2000 --seconds 30 --size 1024
    .venv/bin/python bench/bench_latency.py --seconds 25 --profile     # py-spy of every server too

``magnetar local`` on loopback: ZooKeeper, two bookies and one broker, E/Qw/Qa 2/2/2 with the
journal's fdatasync on (Pulsar's and BookKeeper's defaults otherwise). The Pulsar project's Go
perf tool (bench/perf_go.py, a process of its own, every send checked) publishes ``--rate`` msg/s
of ``--size`` bytes without batching for ``--seconds``; its percentiles are the client's view,
from just before the send to the receipt's callback (the worst 10 s interval after warm-up).
Beside them, the stages as the servers' own latency histograms saw them over the same seconds
(/metrics before and after, p50 and p99 interpolated within a bucket):

  broker publish   SEND read by the broker to its SEND_RECEIPT written
  storage write    the managed ledger's add until Qa bookies acknowledged it
  bookie request   an add request in a bookie, decoded to answered (each bookie)
  journal record   a record's wait from append to durable: group wait, write, fdatasync
  journal sync     one group's write and fdatasync

Beside them, what the servers paid: each process's CPU time (/proc, all its threads) over the
measured seconds, in microseconds per published message (the broker's count of SENDs), and each
event loop's lateness (``magnetar_event_loop_lag_seconds``: p99 and the worst sample's bucket), its
stalls over 10 ms by callback, and its garbage collections. ``--profile`` also records each
server with py-spy into runs/bench/profiles/ and prints where a message's CPU goes, stage by stage
(bench/cpu_stages.py).

The floor row is the same generator against bench/noop_broker.py, which answers every send at
once and stores nothing: what the client, the loopback and a Python event loop cost with no
storage at all. Targets: publish p99 <= 10 ms at 2,000 msg/s. Prints a table and
writes runs/bench/bench_latency.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cpu_stages
import perf_go
import server_costs
from bench_unload import cluster_spec
from common import RUNS, processes, start_noop, write_results
from histograms import buckets, delta, quantile, scrape
from rich.console import Console
from rich.table import Table

from magnetar.local.supervisor import ClusterState, Supervisor

console = Console()
TARGET_P99_MS = 10.0
#: the servers' histograms a publish passes through, outermost first: (row, metric, whose)
STAGES = (
    ("broker publish", "pulsar_broker_publish_latency_seconds", "broker"),
    ("storage write (to Qa bookies)", "pulsar_storage_write_latency_seconds", "broker"),
    ("bookie add request", "bookkeeper_server_ADD_ENTRY_REQUEST_seconds", "bookie"),
    ("journal record (group wait + write + fdatasync)", "bookie_journal_JOURNAL_ADD_ENTRY_seconds", "bookie"),
    ("journal sync (write + fdatasync)", "bookie_journal_JOURNAL_SYNC_seconds", "bookie"),
)


def metrics_urls(state: ClusterState) -> dict[str, list[str]]:
    return {
        "broker": [f"{b.endpoints['web_service_url']}/metrics" for b in state.find("broker")],
        "bookie": [server_costs.bookie_metrics(Path(b.log)) for b in state.find("bookie")],
    }


def snapshot(urls: dict[str, list[str]]) -> dict[str, str]:
    return {url: scrape(url) for group in urls.values() for url in group}


def stage_rows(
    urls: dict[str, list[str]], before: dict[str, str], after: dict[str, str]
) -> list[dict[str, Any]]:
    rows = []
    for label, metric, whose in STAGES:
        for index, url in enumerate(urls[whose]):
            moved = delta(buckets(after[url], metric), buckets(before[url], metric))
            name = label if len(urls[whose]) == 1 else f"{label}, {whose} {index}"
            rows.append({"stage": name, "count": int(moved[-1][1]),
                         "p50_ms": quantile(moved, 0.5), "p99_ms": quantile(moved, 0.99)})  # fmt: skip
    return rows


def publish(url: str, args: argparse.Namespace, topic: str) -> dict[str, Any]:
    figures = perf_go.produce(
        url, topic, rate=args.rate, seconds=args.seconds, batching=False, size=args.size
    )
    return figures.as_dict()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=int, default=2000, help="msg/s, unbatched (default 2000)")
    parser.add_argument("--seconds", type=float, default=30, help="publishing time per row (default 30)")
    parser.add_argument("--size", type=int, default=1024, help="payload bytes (default 1024)")
    parser.add_argument("--profile", action="store_true", help="py-spy each server while it is measured")
    args = parser.parse_args()
    perf_go.ensure_built()
    result: dict[str, Any] = {
        "rate": args.rate,
        "size": args.size,
        "seconds": args.seconds,
        "machine": f"{os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
    }
    with processes() as group:
        console.print("floor: pulsar-perf-go against bench/noop_broker.py (stores nothing) …")
        _, noop_url, _ = start_noop(group)
        result["floor"] = publish(noop_url, args, "persistent://public/default/floor")
        group.stop_all()
    spec = cluster_spec("bench-latency", brokers=1)
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-", dir=os.environ.get("BENCH_DIR")) as tmp:
        supervisor = Supervisor(Path(tmp) / "cluster", on_status=lambda m: console.print(f"[dim]{m}[/]"))
        supervisor.up(spec)
        try:
            state = ClusterState.load(Path(tmp) / "cluster")
            urls = metrics_urls(state)
            service_url = state.find("broker")[0].endpoints["service_url"]
            console.print(f"publishing {args.rate:,} msg/s of {args.size} B for {args.seconds:.0f} s …")
            perf_go.produce(service_url, "persistent://public/default/warm-up", rate=args.rate, seconds=10,
                            batching=False, size=args.size)  # fmt: skip
            servers = server_costs.servers(state)
            profiles = (
                server_costs.start_profiles(servers, args.seconds, RUNS / "profiles") if args.profile else []
            )
            before, cpu_before = snapshot(urls), server_costs.cpu(servers)
            threads_before = server_costs.thread_cpu(servers)
            result["client"] = publish(service_url, args, "persistent://public/default/latency")
            after, cpu_after = snapshot(urls), server_costs.cpu(servers)
            threads = server_costs.thread_cpu_used(threads_before, server_costs.thread_cpu(servers))
            result["stages"] = stage_rows(urls, before, after)
            sends = int(delta(buckets(after[urls["broker"][0]], STAGES[0][1]),
                              buckets(before[urls["broker"][0]], STAGES[0][1]))[-1][1])  # fmt: skip
            result["cpu"] = server_costs.cpu_rows(servers, cpu_before, cpu_after, sends)
            result["loops"] = server_costs.loop_rows(servers, before, after)
            result["profiles"] = server_costs.finish_profiles(profiles)
            result["thread_cpu_s"], result["profile_rate"] = threads, server_costs.PROFILE_RATE
            result["cpu_stages"] = cpu_stages.stage_rows(result)
        finally:
            supervisor.down()
    print_table(result)
    path = write_results(RUNS / "bench_latency.json", result)
    console.print(f"JSON: {path}")
    floor = result["floor"]["p99_ms"]
    if floor > TARGET_P99_MS / 10:
        console.print(
            f"floor p99 {floor:.1f} ms is over a tenth of the {TARGET_P99_MS:.0f} ms target: cannot tell"
        )
        sys.exit(2)


def print_table(result: dict[str, Any]) -> None:
    title = f"a publish at {result['rate']:,} msg/s, {result['size']} B, no batching: where the time goes"
    table = Table("row", "samples", "p50 ms", "p99 ms", title=title)
    for row, figures in (
        ("floor: client vs noop broker", result["floor"]),
        ("client (pulsar-perf-go)", result["client"]),
    ):
        table.add_row(row, "—", f"{figures['p50_ms']:.2f}", f"{figures['p99_ms']:.2f}")
    for stage in result["stages"]:
        table.add_row(
            f"  {stage['stage']}", f"{stage['count']:,}", _ms(stage["p50_ms"]), _ms(stage["p99_ms"])
        )
    console.print(table)
    server_costs.print_tables(console, result["cpu"], result["loops"])
    if result.get("profiles"):
        table = Table("stage", "µs CPU per message", "by server", title="where a message's CPU goes (py-spy)")
        for row in result["cpu_stages"]:
            servers = ", ".join(f"{name} {us:.0f}" for name, us in sorted(row["by_server"].items()))
            table.add_row(row["stage"], f"{row['us_per_message']:.1f}", servers)
        console.print(table)
    for path in result.get("profiles", []):
        console.print(f"profile: {path}")
    client = result["client"]["p99_ms"]
    met = "met" if client <= TARGET_P99_MS else "missed"
    console.print(f"target: publish p99 <= {TARGET_P99_MS:.0f} ms: {client:.1f} ms, {met}")


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
