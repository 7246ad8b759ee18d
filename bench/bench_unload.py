"""Disruption windows of bundle moves, measured by lean clients.

    .venv/bin/python bench/bench_unload.py
    .venv/bin/python bench/bench_unload.py --rate 1000 --topics 8

Three brokers, two bookies and ZooKeeper as processes on loopback (``magnetar local``). For each
move, a namespace with one bundle holds ``--topics`` topics; producer processes send ``--rate``
msg/s in total (no batching, four topics a process) and consumer processes receive them
(``bench/lean_client.py``: callbacks only record, every send's result checked). The bundle is then
(a) unloaded, (b) transferred to another broker, or (c) its owner gets SIGTERM (which transfers
everything first). A topic's window is the largest lateness of its messages around the move:
receipt (producer) or arrival (consumer) minus the time the send was due (``bench/windows.py``).
The first row is the same workload with nothing moved: the floor. Targets: (b) and (c) producer
p99 <= 20 ms and max <= 50 ms, judged only when the floor is at most a tenth of the target;
(a) shows the client-backoff windows that Pulsar's unload causes. Prints a table and writes
runs/bench/bench_unload.json; exits 2 when the floor is too high to judge a target, 1 when a
client failed.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
from common import RUNS, write_results
from windows import AFTER_S, LeanWorkload, summarize, verdict

from magnetar.admin.client import AdminClient
from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.local.supervisor import ClusterState, Supervisor, alive

console = Console()
RESULTS = RUNS / "bench_unload.json"
#: (move, producer p99 target, producer max target), ms
TARGETS = {"transfer": (20.0, 50.0), "sigterm": (20.0, 50.0)}


def admin(base: str, method: str, path: str, body: Any = None) -> Any:
    return AdminClient(base).call(method, path, body)


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
    base: str, service_url: str, brokers: list[BrokerRef], mode: str, topics: int, rate: float, workdir: Path
) -> dict[str, Any]:
    """One move (``unload``, ``transfer`` or ``sigterm`` of the owner; ``none``: nothing moved)
    under load, through the admin REST at ``base``: the windows per producer and per consumer."""
    namespace = f"public/bench-{mode}-{time.time_ns() % 10**6}"
    admin(base, "PUT", f"/admin/v2/namespaces/{namespace}", {"bundles": {"numBundles": 1}})
    names = [f"persistent://{namespace}/t{i}" for i in range(topics)]
    workload = LeanWorkload(service_url, names, rate / topics, workdir / mode)
    workload.start()
    time.sleep(3)
    bundle = admin(base, "GET", f"/admin/v2/namespaces/{namespace}/bundles")
    bundle_name = f"{bundle['boundaries'][0]}_{bundle['boundaries'][1]}"
    lookup = admin(base, "GET", f"/lookup/v2/topic/persistent/{names[0].removeprefix('persistent://')}")
    owner = next(b for b in brokers if b.service_url == lookup["brokerUrl"])
    moved_ns = time.monotonic_ns()
    if mode == "unload":
        admin(base, "PUT", f"/admin/v2/namespaces/{namespace}/{bundle_name}/unload")
    elif mode == "transfer":
        other = next(b for b in brokers if b is not owner)
        query = f"?destinationBroker={other.broker_id}"
        admin(base, "PUT", f"/admin/v2/namespaces/{namespace}/{bundle_name}/unload{query}")
    elif mode == "sigterm":
        os.kill(owner.pid, signal.SIGTERM)
    time.sleep(AFTER_S + 1)
    produced, consumed = workload.stop()
    return {"mode": mode, "owner": owner.name, **summarize(produced, consumed, moved_ns)}


def judge(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The targets of each row, met / missed / cannot tell against the floor row's figures."""
    floor = rows[0]
    verdicts = []
    for row in rows:
        if row["mode"] not in TARGETS:
            continue
        p99_target, max_target = TARGETS[row["mode"]]
        verdicts += [
            {"mode": row["mode"], "measure": "producer p99", "value": row["producer_p99_ms"],
             "target": p99_target, "floor": floor["producer_p99_ms"],
             "verdict": verdict(row["producer_p99_ms"], p99_target, floor["producer_p99_ms"])},
            {"mode": row["mode"], "measure": "producer max", "value": row["producer_max_ms"],
             "target": max_target, "floor": floor["producer_max_ms"],
             "verdict": verdict(row["producer_max_ms"], max_target, floor["producer_max_ms"])},
        ]  # fmt: skip
    return verdicts


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
                url = service_url(brokers)
                rows.append(measure(base, url, brokers, mode, args.topics, args.rate, Path(tmp) / "clients"))
                for record in ClusterState.load(Path(tmp) / "cluster").find("broker"):
                    if not alive(record.pid):
                        supervisor.restart(record.name)
        finally:
            supervisor.down()
    print_table(rows, args)
    verdicts = judge(rows)
    for v in verdicts:
        console.print(
            f"{v['mode']} {v['measure']}: {v['value']:.1f} ms, target {v['target']:g} ms, "
            f"floor {v['floor']:.1f} ms: [bold]{v['verdict']}[/]"
        )
    write_results(RESULTS, {"rate": args.rate, "topics": args.topics, "rows": rows, "targets": verdicts})
    console.print(f"results: {RESULTS}")
    if any(v["verdict"].startswith("cannot tell") for v in verdicts):
        sys.exit(2)


COLUMNS = ("producer_p50_ms", "producer_p99_ms", "producer_max_ms", "consumer_p50_ms", "consumer_p99_ms",
           "consumer_max_ms")  # fmt: skip


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    load = f"{args.rate:,.0f} msg/s, {args.topics} topics, ms"
    title = f"windows of bundle moves: largest lateness per topic ({load})"
    table = Table(title=title)
    for column in ("move", *(c.removesuffix("_ms").replace("_", " ") for c in COLUMNS), "acked", "lost"):
        table.add_column(column, justify="right")
    for r in rows:
        name = "nothing moved (floor)" if r["mode"] == "none" else r["mode"]
        table.add_row(name, *(f"{r[k]:.1f}" for k in COLUMNS), f"{r['acked']:,}", str(r["lost"]))
    console.print(table)


if __name__ == "__main__":
    main()
