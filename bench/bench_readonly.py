"""Read-only broker pool (PIP-63): end-to-end latency on read-only brokers and the
writable broker's outbound bytes before and after moving subscriptions to the pool, measured by
lean clients.

    .venv/bin/python bench/bench_readonly.py
    .venv/bin/python bench/bench_readonly.py --subscriptions 20 --move 10 --rate 200 --duration 20

One writable and two read-only brokers, two bookies and ZooKeeper as processes on loopback
(``magnetar local``). One producer process sends ``--rate`` unbatched ``--size`` byte messages a
second to one topic, read by ``--subscriptions`` subscriptions, ``--per-process`` of them in each
consumer process (``bench/lean_client.py``: callbacks only record, every send's result checked).
Phase "before": every subscription on the writable broker. Phase "after": the consumer processes
are stopped and ``--move`` subscriptions come back through the read-only pool's service URL, the
rest on the writable broker (same names: the cursors carry over). A message's end-to-end latency
is its arrival minus the time its send was due (CLOCK_MONOTONIC, in the payload), over the
messages due within each phase's measured ``--duration``; every one of them must reach every
subscription within ``--drain`` seconds of the phase's end ("missing" otherwise). Outbound
bytes are the writable broker's dispatched bytes (``pulsar_out_bytes`` on its /metrics) per
second of each phase, and the machine's busy share says whether the host kept up. Targets:
outbound after / before = (subscriptions - moved) / subscriptions; read-only p99 <= 2 x writable
p99. Prints a table and writes JSON (``--out``, default runs/bench/bench_readonly.json); exits 1
when a client failed.

Read-only consumers see an entry once the next one (or the writer's explicit LAC,
``bookkeeper_explicit_lac_interval_in_mills``, 100 ms here) tells the bookies it is confirmed: at
low rates that interval is the read-only latency's floor.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
from common import RUNS, machine_ticks, percentile, write_results
from windows import Client, Records, collect, spawn

from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.local.supervisor import ClusterState, ProcessRecord, Supervisor

console = Console()
TOPIC = "persistent://public/default/bench-readonly"
RESULTS = RUNS / "bench_readonly.json"


def out_bytes(broker: ProcessRecord) -> float:
    """Bytes the broker has dispatched to consumers (sum of pulsar_out_bytes over its topics)."""
    with urllib.request.urlopen(broker.endpoints["web_service_url"] + "/metrics", timeout=30) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("pulsar_out_bytes")
    )


def consumers(url: str, names: list[str], per_process: int, workdir: Path, label: str) -> list[Client]:
    """Consumer processes for ``names``, ``per_process`` subscriptions each."""
    groups = [names[i : i + per_process] for i in range(0, len(names), per_process)]
    return [
        spawn("consume", url, [TOPIC], workdir / f"{label}-{n}.json", ["--subscription", ",".join(group)])
        for n, group in enumerate(groups)
    ]


def measure(writable: ProcessRecord, warmup_s: float, duration_s: float) -> dict[str, Any]:
    """After ``warmup_s``, ``duration_s`` of the writable broker's outbound bytes and the machine's
    busy share; the window's bounds (CLOCK_MONOTONIC ns, as the clients' records)."""
    time.sleep(warmup_s)
    bytes_before, ticks_before, start_ns = out_bytes(writable), machine_ticks(), time.monotonic_ns()
    time.sleep(duration_s)
    bytes_after, ticks_after, end_ns = out_bytes(writable), machine_ticks(), time.monotonic_ns()
    busy = (ticks_after[0] - ticks_before[0]) / max(1, ticks_after[2] - ticks_before[2])
    seconds = (end_ns - start_ns) / 1e9
    return {"outbound_bytes_per_s": (bytes_after - bytes_before) / seconds, "machine_busy": busy,
            "start_ns": start_ns, "end_ns": end_ns}  # fmt: skip


def latencies(records: Records, window: dict[str, Any]) -> list[float]:
    return records.latencies_ms(window["start_ns"], window["end_ns"])


def missing(produced: Records, received: Records, window: dict[str, Any]) -> int:
    """Messages due within the window that some subscription of ``received`` never got."""
    sent = {d for d in produced.due_ns[TOPIC] if window["start_ns"] <= d <= window["end_ns"]}
    return sum(len(sent - set(due)) for due in received.due_ns.values())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--subscriptions", type=int, default=50, help="subscriptions (default 50)")
    parser.add_argument("--move", type=int, default=25, help="subscriptions moved to the pool (default 25)")
    parser.add_argument("--per-process", type=int, default=10, help="subscriptions per consumer process (10)")
    parser.add_argument(
        "--rate", type=float, default=100, help="messages/s produced, unbatched (default 100)"
    )
    parser.add_argument("--size", type=int, default=1024, help="message size in bytes (default 1024)")
    parser.add_argument("--duration", type=float, default=20, help="seconds measured per phase (default 20)")
    parser.add_argument("--warmup", type=float, default=5, help="seconds before each phase (default 5)")
    parser.add_argument("--drain", type=float, default=5, help="seconds the consumers get after a phase (5)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON results (default {RESULTS})")
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
            result = run(ClusterState.load(directory), args, Path(tmp) / "clients")
        except RuntimeError as exc:  # a lean client failed: no figure it did not measure
            console.print(f"[red]{exc}[/]")
            return 1
        finally:
            supervisor.down()
    report(result, args)
    return 0


def run(state: ClusterState, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    workdir.mkdir(parents=True)
    brokers = state.find("broker")
    writable = next(b for b in brokers if "read-only" not in b.name)
    url = writable.endpoints["service_url"]
    pool = "pulsar://" + ",".join(
        b.endpoints["service_url"].removeprefix("pulsar://") for b in brokers if "read-only" in b.name
    )
    names = [f"sub-{i}" for i in range(args.subscriptions)]
    moved, staying = names[: args.move], names[args.move :]
    started: list[Client] = []
    try:
        before_clients = consumers(url, names, args.per_process, workdir, "before")
        started += before_clients
        producer = spawn("produce", url, [TOPIC], workdir / "produce.json",
                         ["--rate", str(args.rate), "--size", str(args.size)])  # fmt: skip
        started.append(producer)
        console.print(f"before: {args.subscriptions} subscriptions on the writable broker …")
        before = measure(writable, args.warmup, args.duration)
        time.sleep(args.drain)
        received_before = collect(before_clients, 60, "a consumer process failed")
        console.print(f"after: {args.move} subscriptions through the read-only pool …")
        pool_clients = consumers(pool, moved, args.per_process, workdir, "read-only")
        writable_clients = consumers(url, staying, args.per_process, workdir, "writable")
        started += pool_clients + writable_clients
        after = measure(writable, args.warmup, args.duration)
        time.sleep(args.drain)
        produced = collect([producer], 120, "a producer's send failed or was never answered")
        received_pool = collect(pool_clients, 60, "a read-only consumer process failed")
        received_writable = collect(writable_clients, 60, "a consumer process failed")
    finally:
        for process, _ in started:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    before["writable_ms"] = latencies(received_before, before)
    before["missing"] = missing(produced, received_before, before)
    after["writable_ms"] = latencies(received_writable, after)
    after["read_only_ms"] = latencies(received_pool, after)
    after["missing"] = missing(produced, received_writable, after) + missing(produced, received_pool, after)
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
        k: {"p50": percentile(v, 0.5), "p99": percentile(v, 0.99), "max": max(v, default=float("nan")),
            "n": len(v)}
        for k, v in samples.items()
    }  # fmt: skip
    # Against the writable consumers of the same phase (those of "before" when all were moved).
    reference = "writable, after" if after["writable_ms"] else "writable, before"
    p99_ratio = latency["read-only, after"]["p99"] / latency[reference]["p99"]
    table = Table(
        title=f"read-only pool: {args.subscriptions} subscriptions, {args.move} moved, "
        f"{args.size} B at {args.rate:,.0f} msg/s unbatched (lean clients)"
    )
    for column in ("measure", "value", "target", "met"):
        table.add_column(column, justify="right")
    mb = 1024 * 1024
    for name, phase in (("before", before), ("after", after)):
        table.add_row(
            f"writable outbound {name} (MiB/s)", f"{phase['outbound_bytes_per_s'] / mb:.2f}", "", ""
        )
        table.add_row(f"machine busy {name}", f"{phase['machine_busy']:.0%}", "", "")
        table.add_row(
            f"missing {args.drain:g} s after {name}", str(phase["missing"]), "0", _met(phase["missing"] == 0)
        )
    table.add_row(
        "outbound after / before",
        f"{ratio:.2f}",
        f"{expected:.2f} ± 0.10",
        _met(abs(ratio - expected) <= 0.10),
    )
    for name, figures in latency.items():
        spread = f"{figures['p50']:.1f} / {figures['p99']:.1f} / {figures['max']:.1f}"
        table.add_row(f"e2e p50 / p99 / max {name} (ms)", spread, "", f"n={figures['n']}")
    table.add_row("read-only p99 / writable p99", f"{p99_ratio:.2f}", "<= 2.00", _met(p99_ratio <= 2.0))
    console.print(table)
    doc = {
        "harness": "lean clients (bench/lean_client.py), one producer and consumer processes",
        "subscriptions": args.subscriptions,
        "moved": args.move,
        "per_process": args.per_process,
        "rate": args.rate,
        "size": args.size,
        "duration_s": args.duration,
        "outbound_before_bytes_per_s": before["outbound_bytes_per_s"],
        "outbound_after_bytes_per_s": after["outbound_bytes_per_s"],
        "outbound_ratio": ratio,
        "outbound_ratio_target": expected,
        "machine_busy": {"before": before["machine_busy"], "after": after["machine_busy"]},
        "missing": {"before": before["missing"], "after": after["missing"]},
        "latency_ms": latency,
        "read_only_p99_over_writable_p99": p99_ratio,
    }
    console.print(f"results: {write_results(args.out, doc)}")


def _met(ok: bool) -> str:
    return "[green]yes[/]" if ok else "[red]no[/]"


if __name__ == "__main__":
    sys.exit(main())
