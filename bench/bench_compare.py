"""Magnetar and Apache Pulsar side by side: the same workloads, the same client, one table.

    make bench-compare
    .venv/bin/python bench/bench_compare.py --seconds 5 --backlog 100000
    .venv/bin/python bench/bench_compare.py --only magnetar      # one side (the other column stays empty)
    .venv/bin/python bench/bench_compare.py --failover-only --moves 20 --failover-seconds 60

Each system runs as ZooKeeper (Debian's package), two bookies and two brokers on loopback with
E/Qw/Qa 2/2/2 and fsync on: Magnetar through ``magnetar local``, Apache Pulsar 4.0.x from Maven
Central through bench/pulsar/apache_pulsar.py (Java 17, -Xmx1g per broker, the extensible load
manager). Publishing is measured by the Pulsar project's Go perf tool (bench/perf_go.py:
pulsar-perf-go, built once from the Go module proxy, in a process of its own, every send checked);
the other workloads are those of bench/produce_consume.py and bench/bench_unload.py, with the
official ``pulsar-client``:
  publish throughput (1 KiB, batching) and the RSS of the broker that owns the topic;
  publish p50/p99 at a fixed rate without batching (batches of one message);
  its floor: the same generator against bench/noop_broker.py (answers at once, stores nothing);
  catch-up read rate of a backlog;
  start-to-ready of each standalone (one bookie): launch to the first acknowledged message;
  unload and transfer windows: the largest lateness of a producer's receipts around the move, from
  lean client processes (bench/windows.py), beside the same with nothing moved (the floor).
  duplicates per consumer failover between two geo-replicated regions (bench/bench_failover.py's
  baseline case: PIP-33 snapshots every second, replicated Failover subscription, 1,000 msg/s):
  two ``magnetar local`` regions, and two Pulsar clusters sharing one configuration store.
  The failovers land at random points of the snapshot cycle, so the row gives the mean per
  failover with its standard error and calls a difference only when it exceeds twice the
  combined error.
  messages skipped at those failovers: below the first new message the new region gave and never
  received before the move (PIP-33 promises none; fewer duplicates bought by skipping are no lead).
Beside each of Magnetar's rows, its brokers' event-loop lag over that measurement (the worst
broker's p99 of magnetar_event_loop_lag_seconds, and the bucket of its worst sample).
Ratio is Magnetar / Pulsar. Prints the table and writes bench/results/bench_compare.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulsar
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "pulsar"))
import perf_go
import server_costs
from apache_pulsar import VERSION, ApachePulsar
from bench_failover import EAST, WEST, Regions, run_case
from bench_failover import spec as failover_spec
from bench_unload import BrokerRef, cluster_spec, magnetar_brokers, measure
from common import RUNS, cpu_seconds, machine_ticks, processes, start_noop
from produce_consume import catch_up, rss_mb
from windows import LeanWorkload, latency

from magnetar.admin.client import AdminClient
from magnetar.common.ports import free_port
from magnetar.local.supervisor import ClusterState, Supervisor

console = Console()
# readiness probes fail on purpose until the standalone is up: keep the client library quiet
#: the client's own (C++) logger: a Python logger can abort the process at exit
#: (apache/pulsar-client-python#256)
_CLIENT_LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
RESULTS = Path(__file__).parent / "results" / "bench_compare.json"


@dataclass
class System:
    name: str
    admin_url: str
    service_url: str
    brokers: list[BrokerRef]
    #: the brokers' /metrics pages with the event loop's lag (Magnetar's; none for Pulsar's JVMs)
    lag_pages: list[str] = field(default_factory=list)

    def owner(self, topic: str) -> BrokerRef:
        path = topic.removeprefix("persistent://")
        url = AdminClient(self.admin_url).call("GET", f"/lookup/v2/topic/persistent/{path}")["brokerUrl"]
        return next(b for b in self.brokers if b.service_url == url)


@contextlib.contextmanager
def magnetar(workdir: Path) -> Iterator[System]:
    spec = cluster_spec("compare", brokers=2)
    supervisor = Supervisor(workdir / "cluster", on_status=lambda m: console.print(f"[dim]{m}[/]"))
    supervisor.up(spec)
    try:
        state = ClusterState.load(workdir / "cluster")
        brokers = magnetar_brokers(state)
        pages = [f"{b.endpoints['web_service_url']}/metrics" for b in state.find("broker")]
        yield System(
            "Magnetar",
            state.find("broker")[0].endpoints["web_service_url"],
            brokers[0].service_url,
            brokers,
            pages,
        )
    finally:
        supervisor.down()


@contextlib.contextmanager
def apache_pulsar(workdir: Path) -> Iterator[System]:
    with ApachePulsar(workdir / "pulsar-cluster", bookies=2) as cluster:
        started = cluster.cluster(brokers=2)
        brokers = [
            BrokerRef(r.name, r.endpoints["service_url"], r.endpoints["broker_id"], r.pid)
            for r in cluster.state.find("broker")
        ]
        yield System(f"Apache Pulsar {VERSION}", started.admin_url, started.service_url, brokers)


def first_ack_seconds(launch: Callable[[], str], timeout_s: float = 180) -> float:
    """Seconds from ``launch`` (which starts a standalone and returns its service URL) to the
    first message it acknowledges."""
    start = time.perf_counter()
    url = launch()
    host, port = url.removeprefix("pulsar://").rsplit(":", 1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
            break
        time.sleep(0.02)
    while time.monotonic() < deadline:
        client = pulsar.Client(url, operation_timeout_seconds=5, logger=_CLIENT_LOG)
        try:
            client.create_producer(f"persistent://public/default/ready-{time.time_ns()}").send(b"ready")
            return time.perf_counter() - start
        except Exception:  # not ready yet: any refusal means try again
            time.sleep(0.05)
        finally:
            client.close()
    raise RuntimeError(f"{url}: no message acknowledged within {timeout_s:.0f}s")


def magnetar_standalone_start(workdir: Path) -> float:
    processes: list[subprocess.Popen[bytes]] = []

    def launch() -> str:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "magnetar", "standalone", "--data-dir",
             str(workdir / "magnetar-standalone"), "--port", str(port), "--web-port", str(free_port())],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        processes.append(process)
        return f"pulsar://127.0.0.1:{port}"

    try:
        return first_ack_seconds(launch)
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)


def pulsar_standalone_start(workdir: Path) -> float:
    with ApachePulsar(workdir / "pulsar-standalone", bookies=1, ledger=(1, 1, 1)) as standalone:
        return first_ack_seconds(lambda: standalone.standalone(wait=False).service_url)


def magnetar_failover(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """bench_failover's baseline case (1 s snapshots, no (a)) on two Magnetar regions."""
    supervisor = Supervisor(workdir / "geo", on_status=lambda m: console.print(f"[dim]{m}[/]"))
    supervisor.up(failover_spec())
    try:
        regions = Regions.load(workdir / "geo")
        return _failover_case(regions, args, policies=True)
    finally:
        supervisor.down()


def pulsar_failover(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The same case on two Apache Pulsar clusters (one broker and one bookie each, as
    bench_failover's regions) sharing jp-east's ZooKeeper as configuration store."""
    east = ApachePulsar(workdir / "pulsar-east", bookies=1, ledger=(1, 1, 1))
    west = ApachePulsar(workdir / "pulsar-west", bookies=1, ledger=(1, 1, 1))
    with east, west:
        e = east.cluster(1, cluster_name=EAST, extensible=False)
        w = west.cluster(1, cluster_name=WEST, configuration_store=east.state.zookeeper, extensible=False)
        regions = Regions({
            EAST: {"service_url": e.service_url, "web_service_url": e.admin_url},
            WEST: {"service_url": w.service_url, "web_service_url": w.admin_url},
        })  # fmt: skip
        return _failover_case(regions, args, policies=False)


def _failover_case(regions: Regions, args: argparse.Namespace, *, policies: bool) -> dict[str, Any]:
    regions.admin("PUT", "/admin/v2/tenants/bench", {"adminRoles": [], "allowedClusters": [EAST, WEST]})
    result: dict[str, Any] = run_case(regions, 1000, False, args.failover_rate, args.failover_seconds,
                                      True, 20, args.moves, policies=policies, seed=args.seed)  # fmt: skip
    return result


def measure_system(system: System, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"system": system.name}
    watch = server_costs.LagWatch(system.lag_pages)
    topic = f"persistent://public/default/throughput-{time.time_ns()}"
    owner = system.owner(topic)
    time.sleep(2)
    result["rss_idle_mb"] = rss_mb(owner.pid)
    console.print(f"[bold]{system.name}[/]: publish throughput, 1 KiB, batching (pulsar-perf-go) …")
    with watch.step("throughput"):
        result["throughput"] = publish_throughput(system, owner, topic, args.seconds)
    console.print(
        f"[bold]{system.name}[/]: latency at {args.rate:,} msg/s without batching (pulsar-perf-go) …"
    )
    with watch.step("latency"):
        figures = perf_go.produce(
            system.service_url, f"{topic}-latency", rate=args.rate, seconds=args.seconds, batching=False
        )
    result["latency"] = {
        "publish_p50_ms": figures.p50_ms,
        "publish_p99_ms": figures.p99_ms,
        "publish_max_ms": figures.max_ms,
        "msgs_per_s": figures.msgs_per_s,
    }
    console.print(f"[bold]{system.name}[/]: end-to-end latency at {args.rate:,} msg/s (lean clients) …")
    with watch.step("e2e"):
        result["e2e"] = end_to_end(system, args.rate, args.seconds)
    console.print(f"[bold]{system.name}[/]: catch-up read of {args.backlog:,} messages …")
    with watch.step("catch_up"):
        result["catch_up"] = catch_up(system.service_url, args.backlog)
    for mode in ("none", "unload", "transfer"):  # "none": the floor, nothing moved
        console.print(
            f"[bold]{system.name}[/]: {mode} at {args.move_rate:,.0f} msg/s over {args.topics} topics …"
        )
        clients = RUNS / "lean-clients" / system.name.replace(" ", "-")
        with watch.step(mode):
            result[mode] = measure(
                system.admin_url,
                system.service_url,
                system.brokers,
                mode,
                args.topics,
                args.move_rate,
                clients,
            )
    result["loop_lag"] = watch.steps
    return result


def end_to_end(system: System, rate: float, seconds: float) -> dict[str, Any]:
    """One topic at ``rate`` msg/s without batching, a producer and a consumer process of their
    own (bench/windows.py); percentiles after the first second."""
    topic = f"persistent://public/default/e2e-{time.time_ns()}"
    workload = LeanWorkload(system.service_url, [topic], rate, RUNS / "lean-clients" / "e2e")
    workload.start()
    started = time.monotonic_ns()
    time.sleep(seconds + 1)
    produced, consumed = workload.stop()
    figures = latency(produced, consumed, started + 1_000_000_000, started + int((seconds + 1) * 1e9))
    if figures["lost"]:
        raise RuntimeError(f"{system.name}: {figures['lost']} acknowledged messages never arrived")
    return figures


def publish_throughput(system: System, owner: BrokerRef, topic: str, seconds: float) -> dict[str, Any]:
    """pulsar-perf-go unthrottled with batching; the owner's peak RSS meanwhile."""
    peak = [0.0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.5):
            peak[0] = max(peak[0], rss_mb(owner.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    ticks, broker_cpu, started = machine_ticks(), cpu_seconds(owner.pid), time.monotonic()
    try:
        figures = perf_go.produce(system.service_url, topic, rate=0, seconds=seconds, batching=True)
    finally:
        stop.set()
        sampler.join()
    elapsed = time.monotonic() - started
    busy, _, total = (b - a for a, b in zip(ticks, machine_ticks(), strict=True))
    # What bounds it: the owner's cores beside the whole machine's (of os.cpu_count()).
    return {
        "msgs_per_s": figures.msgs_per_s,
        "rss_under_load_mb": peak[0],
        "broker_cores": (cpu_seconds(owner.pid) - broker_cpu) / elapsed,
        "machine_cores_busy": busy / total * (os.cpu_count() or 1) if total else None,
    }


# (label, how to read it from a result, unit, True when higher is better)
ROWS: list[tuple[str, Callable[[dict[str, Any]], float], str, bool]] = [
    ("publish throughput (1 KiB, batching)", lambda r: r["throughput"]["msgs_per_s"], "msg/s", True),
    ("  owner broker's cores meanwhile", lambda r: r["throughput"]["broker_cores"], "cores", False),
    ("  machine's cores busy meanwhile", lambda r: r["throughput"]["machine_cores_busy"], "cores", False),
    ("floor: publish p50 vs a broker storing nothing", lambda r: r["floor"]["p50_ms"], "ms", False),
    ("floor: publish p99 vs a broker storing nothing", lambda r: r["floor"]["p99_ms"], "ms", False),
    ("publish p50 (fixed rate, no batching)", lambda r: r["latency"]["publish_p50_ms"], "ms", False),
    ("publish p99 (fixed rate, no batching)", lambda r: r["latency"]["publish_p99_ms"], "ms", False),
    ("end-to-end p50 (fixed rate, no batching, lean clients)", lambda r: r["e2e"]["e2e_p50_ms"], "ms", False),
    ("end-to-end p99 (fixed rate, no batching, lean clients)", lambda r: r["e2e"]["e2e_p99_ms"], "ms", False),
    ("catch-up read rate", lambda r: r["catch_up"]["msgs_per_s"], "msg/s", True),
    ("broker RSS idle", lambda r: r["rss_idle_mb"], "MB", False),
    ("broker RSS under load", lambda r: r["throughput"]["rss_under_load_mb"], "MB", False),
    ("standalone start-to-ready", lambda r: r["standalone_start_s"], "s", False),
    ("floor (nothing moved), producer p99", lambda r: r["none"]["producer_p99_ms"], "ms", False),
    ("floor (nothing moved), producer max", lambda r: r["none"]["producer_max_ms"], "ms", False),
    ("unload window, producer p99", lambda r: r["unload"]["producer_p99_ms"], "ms", False),
    ("unload window, producer max", lambda r: r["unload"]["producer_max_ms"], "ms", False),
    ("transfer window, producer p99", lambda r: r["transfer"]["producer_p99_ms"], "ms", False),
    ("transfer window, producer max", lambda r: r["transfer"]["producer_max_ms"], "ms", False),
]

#: the measurement each row comes from, for the event loop's lag beside it
ROW_STEPS = {
    "publish throughput (1 KiB, batching)": "throughput",
    "publish p50 (fixed rate, no batching)": "latency",
    "publish p99 (fixed rate, no batching)": "latency",
    "end-to-end p50 (fixed rate, no batching, lean clients)": "e2e",
    "end-to-end p99 (fixed rate, no batching, lean clients)": "e2e",
    "catch-up read rate": "catch_up",
    "broker RSS under load": "throughput",
    "floor (nothing moved), producer p99": "none",
    "floor (nothing moved), producer max": "none",
    "unload window, producer p99": "unload",
    "unload window, producer max": "unload",
    "transfer window, producer p99": "transfer",
    "transfer window, producer max": "transfer",
}

#: messages a failover's new region passed over (below the first new message it gave, never
#: received before the failover): PIP-33 must never skip, so fewer duplicates bought this way
#: are no lead
SKIPPED_ROW = (
    "messages skipped at failovers (PIP-33 defaults)",
    lambda r: r["failover"]["skipped"],
    "messages",
    False,
)


def table_rows(
    magnetar_result: dict[str, Any] | None, pulsar_result: dict[str, Any] | None
) -> list[dict[str, Any]]:
    rows = [_row(row, magnetar_result, pulsar_result) for row in ROWS]
    rows.append(failover_row(_per_failover(magnetar_result), _per_failover(pulsar_result)))
    rows.append(_row(SKIPPED_ROW, magnetar_result, pulsar_result))
    return rows


def _row(
    row: tuple[str, Callable[[dict[str, Any]], float], str, bool],
    magnetar_result: dict[str, Any] | None,
    pulsar_result: dict[str, Any] | None,
) -> dict[str, Any]:
    label, read, unit, higher_better = row
    ours, theirs = _read(read, magnetar_result), _read(read, pulsar_result)
    ratio = ours / theirs if ours is not None and theirs else None
    behind = None
    if ours is not None and theirs is not None and ours != theirs:
        behind = ours < theirs if higher_better else ours > theirs
    lag = ((magnetar_result or {}).get("loop_lag") or {}).get(ROW_STEPS.get(label, ""))
    return {"measure": label, "unit": unit, "magnetar": ours, "pulsar": theirs, "ratio": ratio,
            "magnetar_behind": behind, "magnetar_loop_lag": lag}  # fmt: skip


def failover_row(ours: tuple[float, float] | None, theirs: tuple[float, float] | None) -> dict[str, Any]:
    """Duplicates per failover: (mean, standard error) each. Where a failover lands in the
    snapshot cycle sets most of its duplicates, so a difference within twice the combined
    error is noise, not a lead."""
    row: dict[str, Any] = {
        "measure": "duplicates per failover (PIP-33 defaults)", "unit": "messages",
        "magnetar": None if ours is None else ours[0], "pulsar": None if theirs is None else theirs[0],
        "magnetar_stderr": None if ours is None else ours[1],
        "pulsar_stderr": None if theirs is None else theirs[1],
        "ratio": ours[0] / theirs[0] if ours is not None and theirs is not None and theirs[0] else None,
        "magnetar_behind": None,
    }  # fmt: skip
    if ours is not None and theirs is not None:
        noise = 2 * (ours[1] ** 2 + theirs[1] ** 2) ** 0.5
        row["within_noise"] = abs(ours[0] - theirs[0]) <= noise
        row["magnetar_behind"] = None if row["within_noise"] else ours[0] > theirs[0]
    return row


def _read(read: Callable[[dict[str, Any]], float], result: dict[str, Any] | None) -> float | None:
    if result is None:
        return None
    with contextlib.suppress(KeyError, TypeError):
        return float(read(result))
    return None


def _per_failover(result: dict[str, Any] | None) -> tuple[float, float] | None:
    failover = (result or {}).get("failover")
    if not failover or failover.get("duplicates_mean") is None:
        return None
    return float(failover["duplicates_mean"]), float(failover["duplicates_stderr"] or 0.0)


def print_table(rows: list[dict[str, Any]], pulsar_name: str) -> None:
    table = Table(
        title="Magnetar / Apache Pulsar, same machine and client (2 brokers, 2 bookies, E/Qw/Qa 2/2/2, fsync)"
    )
    for column in ("measure", "Magnetar", pulsar_name, "ratio", "", "Magnetar loop lag p99 / max ≤"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    for row in rows:
        verdict = {True: "[red]behind[/]", False: "[green]ahead[/]", None: ""}[row["magnetar_behind"]]
        table.add_row(
            row["measure"],
            _fmt(row["magnetar"], row["unit"], row.get("magnetar_stderr")),
            _fmt(row["pulsar"], row["unit"], row.get("pulsar_stderr")) if row["pulsar"] is not None else "—",
            f"{row['ratio']:.2f}" if row["ratio"] is not None else "—",
            "[yellow]within noise[/]" if row.get("within_noise") else verdict,
            _lag(row.get("magnetar_loop_lag")),
        )
    console.print(table)


def _lag(lag: dict[str, float | None] | None) -> str:
    """The worst broker's event-loop lag over the row's measurement (magnetar_event_loop_lag_seconds)."""
    if not lag or lag.get("lag_p99_ms") is None:
        return ""
    worst = lag.get("lag_max_ms_at_most")
    return (
        f"{lag['lag_p99_ms']:.1f} / {worst:,.0f} ms" if worst is not None else f"{lag['lag_p99_ms']:.1f} ms"
    )


def _fmt(value: float | None, unit: str, error: float | None = None) -> str:
    if value is None:
        return "—"
    text = f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"
    return f"{text} ± {error:,.0f} {unit}" if error is not None else f"{text} {unit}"


def publish_floor(args: argparse.Namespace) -> dict[str, Any]:
    """pulsar-perf-go at the fixed rate against bench/noop_broker.py, which answers every send at
    once and stores nothing: the generator's own p50/p99 here, the same for both columns."""
    console.print(f"floor: pulsar-perf-go at {args.rate:,} msg/s against a broker that stores nothing …")
    with processes() as group:
        _, url, _ = start_noop(group)
        figures = perf_go.produce(url, "persistent://public/default/floor", rate=args.rate,
                                  seconds=args.seconds, batching=False)  # fmt: skip
    return figures.as_dict()


def measure_magnetar(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    with magnetar(workdir) as system:
        result = measure_system(system, args)
    console.print("[bold]Magnetar[/]: standalone start-to-ready …")
    result["standalone_start_s"] = magnetar_standalone_start(workdir)
    return result


def measure_pulsar(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    with apache_pulsar(workdir) as system:
        result = measure_system(system, args)
    console.print(f"[bold]Apache Pulsar {VERSION}[/]: standalone start-to-ready …")
    result["standalone_start_s"] = pulsar_standalone_start(workdir)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seconds", type=float, default=30, help="length of the throughput and latency runs (30)"
    )
    parser.add_argument("--rate", type=int, default=2000, help="fixed publish rate without batching (2000/s)")
    parser.add_argument(
        "--backlog", type=int, default=200_000, help="messages in the catch-up read (200,000)"
    )
    parser.add_argument(
        "--move-rate", type=float, default=500, help="msg/s over all topics during moves (500)"
    )
    parser.add_argument("--topics", type=int, default=8, help="topics in the moved bundle (8)")
    parser.add_argument("--failover-rate", type=float, default=1000, help="msg/s in the failover case (1000)")
    parser.add_argument(
        "--failover-seconds", type=float, default=20, help="seconds of the failover case (20)"
    )
    parser.add_argument("--moves", type=int, default=12, help="consumer failovers in the case (12)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the failover points (1)")
    parser.add_argument(
        "--failover",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure duplicates after failovers (two regions per system)",
    )
    parser.add_argument("--only", choices=["magnetar", "pulsar"], help="measure one side only")
    parser.add_argument(
        "--failover-only", action="store_true", help="only the failover row (two regions per system)"
    )
    args = parser.parse_args()
    results: dict[str, dict[str, Any] | None] = {"magnetar": None, "pulsar": None}
    floor = {} if args.failover_only else publish_floor(args)
    with tempfile.TemporaryDirectory(prefix="magnetar-compare-", dir=os.environ.get("BENCH_DIR")) as tmp:
        workdir = Path(tmp)
        if args.only != "pulsar":
            ours = {} if args.failover_only else {**measure_magnetar(workdir, args), "floor": floor}
            if args.failover or args.failover_only:
                console.print("[bold]Magnetar[/]: consumer failovers between two regions …")
                ours["failover"] = magnetar_failover(workdir, args)
            results["magnetar"] = ours
        if args.only != "magnetar":
            theirs = {} if args.failover_only else {**measure_pulsar(workdir, args), "floor": floor}
            if args.failover or args.failover_only:
                console.print(f"[bold]Apache Pulsar {VERSION}[/]: consumer failovers between two clusters …")
                theirs["failover"] = pulsar_failover(workdir, args)
            results["pulsar"] = theirs
    rows = table_rows(results["magnetar"], results["pulsar"])
    print_table(rows, f"Apache Pulsar {VERSION}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"settings": vars(args), "results": results, "rows": rows,
                                   "machine": f"{os.cpu_count()} cores"}, indent=2))  # fmt: skip
    console.print(f"results: {RESULTS}")


if __name__ == "__main__":
    main()
