"""Consumer failover across regions with replicated subscriptions, official client.

    .venv/bin/python bench/bench_failover.py
    .venv/bin/python bench/bench_failover.py --rate 1000 --seconds 20 --moves 5 --out runs/bench/failover.json

Two regions (jp-east, jp-west: one ZooKeeper, one bookie and one broker each, ``magnetar local``
processes on loopback). For each case, a namespace replicated to both regions, with the case's
PIP-33 snapshot frequency and with or without (a) (individually acknowledged messages past the
snapshot point carried in the update). A producer process in jp-east (``bench/lean_client.py``:
every send's result checked) sends ``--rate`` msg/s (batched, 5 ms, as Pulsar's client does by
default; ``--no-batching``) for ``--seconds``; a consumer on a replicated Failover subscription
receives and acknowledges in jp-east and, ``--moves`` times, closes and subscribes in the other
region under the same name (as an application failing over). A failover's duplicates depend on
where in the snapshot cycle it lands, so the moves are spread evenly with a random offset of up
to +/-40% of their spacing (``--seed``): evenly spaced moves whose spacing is a whole number of
cycles would all land at the same point of it and measure one point many times. It then receives
until everything sent has arrived (or nothing arrives for ``--quiet`` seconds). The failover
consumer stays in this process: what it counts is which messages came twice, not when.
Counted: messages sent (acknowledged by jp-east), received (distinct), duplicates (received
again after a failover, all failovers of the case; also per failover, with their mean and its
standard error, and as the age in ms of the position the consumer resumed from: duplicates /
rate), skipped (passed over by a failover's new region: below the first new message it gave and
not received before the move; PIP-33 promises none), lost (acknowledged, never received).
Replication lag (ms): plain subscriptions in both regions, each in a lean consumer process of
its own, receive every message; lag = arrival in jp-west minus arrival in jp-east (the machine's
CLOCK_MONOTONIC), p50 and p99; e2e: arrival in jp-west minus the time the send was due (includes
batching and jp-east's write).

Targets: zero loss; with (a) at 100 ms, duplicates <= 10% of the 1000 ms / no-(a)
figure (Pulsar's default behaviour); replication lag p99 <= 50 ms on loopback.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pulsar
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
from lean_client import STAMP
from windows import Client, collect, spawn

from magnetar.admin.client import AdminClient
from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.local.supervisor import ClusterState, Supervisor

console = Console()
#: the client's own (C++) logger: a Python logger can abort the process at exit
#: (apache/pulsar-client-python#256)
_LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
EAST, WEST = "jp-east", "jp-west"
#: (snapshot frequency ms, carry individually acknowledged messages: beyond-PIP-33 (a))
CASES = [(1000, False), (1000, True), (100, False), (100, True)]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


class Regions:
    """The two regions' service and admin URLs (``magnetar local``'s, or Apache Pulsar's)."""

    def __init__(self, urls: dict[str, dict[str, str]]) -> None:
        self.urls = urls

    @classmethod
    def load(cls, directory: Path) -> Regions:
        return cls(ClusterState.load(directory).regions)

    def service_url(self, region: str) -> str:
        return self.urls[region]["service_url"]

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        return AdminClient(self.urls[EAST]["web_service_url"]).call(method, path, body)

    def client(self, region: str) -> pulsar.Client:
        return pulsar.Client(self.service_url(region), operation_timeout_seconds=30, logger=_LOG)


def spec() -> ClusterSpec:
    return ClusterSpec(
        name="bench-failover",
        regions=[
            RegionSpec(
                name=name,
                bookies=1,
                brokers=1,
                ledger=LedgerSpec(ensemble_size=1, write_quorum=1, ack_quorum=1),
                broker_settings={"replication_policy_check_interval_seconds": 0.5},
            )
            for name in (EAST, WEST)
        ],
    )


class FailoverConsumer(threading.Thread):
    """Receives and acknowledges on the replicated subscription; moves to the other region
    each time ``moves`` is raised (jp-east -> jp-west -> jp-east ...)."""

    def __init__(self, regions: Regions, topic: str) -> None:
        super().__init__(daemon=True)
        self.regions = regions
        self.topic = topic
        self.received: list[int] = []
        self.moves = 0  # raised by the producer side
        self.stop = threading.Event()
        self.moved = 0
        #: how many messages had been received when each failover happened
        self.marks: list[int] = []

    def _subscribe(self, region: str) -> tuple[pulsar.Client, pulsar.Consumer]:
        client = self.regions.client(region)
        consumer = client.subscribe(
            self.topic,
            "failover",
            consumer_type=pulsar.ConsumerType.Failover,
            initial_position=pulsar.InitialPosition.Earliest,
            replicate_subscription_state_enabled=True,
        )
        return client, consumer

    def run(self) -> None:
        client, consumer = self._subscribe(EAST)
        while not self.stop.is_set():
            if self.moved < self.moves:
                consumer.close()
                client.close()
                self.marks.append(len(self.received))
                self.moved += 1
                client, consumer = self._subscribe(WEST if self.moved % 2 else EAST)
            try:
                message = consumer.receive(200)
            except pulsar.Timeout:
                continue
            self.received.append(STAMP.unpack_from(message.data())[0])  # its due time: its id
            consumer.acknowledge(message)
        consumer.close()
        client.close()


def failover_points(total: int, moves: int, seed: int) -> list[int]:
    """Message indexes after which the consumer moves: evenly spaced, each shifted at random by
    up to 40% of the spacing, so the moves land at independent points of the snapshot cycle."""
    spacing = total / (moves + 1)
    rng = random.Random(seed)
    return sorted(max(1, int((k + rng.uniform(-0.4, 0.4)) * spacing)) for k in range(1, moves + 1))


def duplicates_per_failover(received: list[int], marks: list[int]) -> list[int]:
    """Per failover: messages received after it (before the next) that had been received
    before it."""
    counts = []
    for k, start in enumerate(marks):
        end = marks[k + 1] if k + 1 < len(marks) else len(received)
        before = set(received[:start])
        counts.append(sum(1 for uid in received[start:end] if uid in before))
    return counts


def skipped_per_failover(received: list[int], marks: list[int]) -> list[int]:
    """Per failover: messages the new region passed over, that is, below the first new message
    it gave and never received before the failover (received later, out of order, if at all).
    PIP-33 must never skip: any count here means the new region's position was ahead of what
    the consumer had seen."""
    counts = []
    for k, start in enumerate(marks):
        end = marks[k + 1] if k + 1 < len(marks) else len(received)
        before = set(received[:start])
        first_new = next((n for n in received[start:end] if n not in before), None)
        counts.append(0 if first_new is None else sum(1 for n in range(first_new) if n not in before))
    return counts


def per_failover_text(result: dict[str, Any]) -> str:
    """Mean duplicates per failover, +/- its standard error."""
    mean, error = result["duplicates_mean"], result["duplicates_stderr"]
    if mean is None:
        return "-"
    return f"{mean:.0f}" if error is None else f"{mean:.0f} ± {error:.0f}"


def standard_error(values: list[int]) -> float | None:
    return statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else None


def run_case(
    regions: Regions,
    frequency_ms: int,
    carry: bool,
    rate: float,
    seconds: float,
    batching: bool,
    quiet_s: float,
    moves: int,
    *,
    policies: bool = True,
    seed: int = 1,
) -> dict[str, Any]:
    """One case; ``policies=False`` leaves the snapshot frequency and (a) at the brokers'
    defaults (1 s, off), for Apache Pulsar, which has neither namespace policy."""
    namespace = f"bench/f{frequency_ms}-{'a' if carry else 'p'}-{int(time.time())}"
    regions.admin("PUT", f"/admin/v2/namespaces/{namespace}", {"replication_clusters": [EAST, WEST]})
    if policies:
        regions.admin(
            "POST", f"/admin/v2/namespaces/{namespace}/replicatedSubscriptionsSnapshotFrequency", frequency_ms
        )
        regions.admin("POST", f"/admin/v2/namespaces/{namespace}/replicatedSubscriptionsCarryAcks", carry)
    topic = f"persistent://{namespace}/orders"
    workdir = Path(tempfile.mkdtemp(prefix="bench-failover-clients-"))
    failover = FailoverConsumer(regions, topic)
    failover.start()
    started: list[Client] = []
    try:
        lag = {r: spawn("consume", regions.service_url(r), [topic], workdir / f"lag-{r}.json",
                        ["--subscription", "lag"]) for r in (EAST, WEST)}  # fmt: skip
        started += lag.values()
        time.sleep(1.5)  # the subscriptions exist and a snapshot or two were taken
        options = ["--rate", str(rate), "--seconds", str(seconds), "--size", "100",
                   "--batching-ms", "5" if batching else "0"]  # fmt: skip
        producer = spawn("produce", regions.service_url(EAST), [topic], workdir / "produce.json", options)
        started.append(producer)
        begun = time.monotonic()
        for index in failover_points(int(rate * seconds), moves, seed):
            time.sleep(max(0.0, begun + index / rate - time.monotonic()))
            failover.moves += 1
        producer[0].wait(seconds + 120)  # it flushes and waits for every receipt
        sent = collect([producer], 60, "a send failed or was never answered").due_ns[topic]
        # Drain: until everything arrived, or nothing more arrived for a while (then what is
        # missing counts as lost).
        progress, last_change = -1, time.monotonic()
        while time.monotonic() - last_change < quiet_s and not set(sent) <= set(failover.received):
            if len(failover.received) != progress:
                progress, last_change = len(failover.received), time.monotonic()
            time.sleep(0.2)
        time.sleep(1)  # late duplicates, if any, are counted
        arrivals = {r: collect([client], 60, f"the lag consumer in {r} failed") for r, client in lag.items()}
    finally:
        failover.stop.set()
        failover.join(10)
        for process, _ in started:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
    index_of = {due: n for n, due in enumerate(sent)}  # due times are ids; indexes order them
    received = [index_of.get(due, -1) for due in failover.received]
    per_failover = duplicates_per_failover(received, failover.marks)
    skipped = skipped_per_failover(received, failover.marks)
    east = dict(zip(arrivals[EAST].due_ns[topic], arrivals[EAST].done_ns[topic], strict=True))
    west = dict(zip(arrivals[WEST].due_ns[topic], arrivals[WEST].done_ns[topic], strict=True))
    # Replication lag proper: available in jp-west minus available in jp-east (no batching
    # delay nor jp-east's own write in it).
    replication = [(at - east[due]) / 1e6 for due, at in west.items() if due in east]
    end_to_end = [(at - due) / 1e6 for due, at in west.items()]
    return {
        "snapshot_frequency_ms": frequency_ms,
        "carry_acks": carry,
        "sent": len(sent),
        "received_distinct": len(set(received)),
        "failovers": failover.moved,
        "duplicates": len(received) - len(set(received)),
        "duplicates_per_failover": per_failover,
        "duplicates_mean": statistics.fmean(per_failover) if per_failover else None,
        "duplicates_stderr": standard_error(per_failover),
        "skipped_per_failover": skipped,
        "skipped": sum(skipped),
        "resume_age_ms_mean": statistics.fmean(per_failover) / rate * 1000 if per_failover else None,
        "lost": len(set(sent) - set(failover.received)),
        "lag_p50_ms": percentile(replication, 50),
        "lag_p99_ms": percentile(replication, 99),
        "end_to_end_p50_ms": percentile(end_to_end, 50),
        "end_to_end_p99_ms": percentile(end_to_end, 99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=1000, help="messages/s produced in jp-east")
    parser.add_argument("--seconds", type=float, default=20, help="seconds of producing per case")
    parser.add_argument(
        "--moves", type=int, default=5, help="failovers per case (spread at random, alternating regions)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the failover points")
    parser.add_argument(
        "--batching", action=argparse.BooleanOptionalAction, default=True, help="producer batching (5 ms)"
    )
    parser.add_argument("--quiet", type=float, default=20, help="drain ends after this many quiet seconds")
    parser.add_argument(
        "--cluster-dir", type=Path, default=None, help="an already running two-region cluster"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench/bench_failover.json"))
    args = parser.parse_args()
    own = args.cluster_dir is None
    directory = args.cluster_dir or Path(tempfile.mkdtemp(prefix="bench-failover-")) / "cluster"
    supervisor = Supervisor(directory)
    if own:
        console.print(f"starting two regions in {directory}")
        supervisor.up(spec())
    try:
        regions = Regions.load(directory)
        regions.admin("PUT", "/admin/v2/tenants/bench", {"allowedClusters": [EAST, WEST]})
        results = []
        for frequency_ms, carry in CASES:
            console.print(f"case: snapshots every {frequency_ms} ms, (a) {'on' if carry else 'off'}")
            results.append(
                run_case(
                    regions,
                    frequency_ms,
                    carry,
                    args.rate,
                    args.seconds,
                    args.batching,
                    args.quiet,
                    args.moves,
                    seed=args.seed,
                )
            )
    finally:
        if own:
            supervisor.down()
            shutil.rmtree(directory.parent, ignore_errors=True)
    baseline = next(r for r in results if r["snapshot_frequency_ms"] == 1000 and not r["carry_acks"])
    best = next(r for r in results if r["snapshot_frequency_ms"] == 100 and r["carry_acks"])
    table = Table(
        title=f"Consumer failovers jp-east <-> jp-west ({args.moves} per case) at {args.rate:g} msg/s "
        f"({'batched' if args.batching else 'no batching'}, lean client processes)"
    )
    columns = (
        "snapshots",
        "(a)",
        "sent",
        "received",
        "duplicates",
        "per failover",
        "skipped",
        "resume age ms",
        "lost",
        "lag p50",
        "lag p99",
        "e2e p50",
        "e2e p99",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            f"{r['snapshot_frequency_ms']} ms",
            "on" if r["carry_acks"] else "off",
            str(r["sent"]),
            str(r["received_distinct"]),
            str(r["duplicates"]),
            per_failover_text(r),
            str(r["skipped"]),
            "-" if r["resume_age_ms_mean"] is None else f"{r['resume_age_ms_mean']:.0f}",
            str(r["lost"]),
            f"{r['lag_p50_ms']:.1f}",
            f"{r['lag_p99_ms']:.1f}",
            f"{r['end_to_end_p50_ms']:.1f}",
            f"{r['end_to_end_p99_ms']:.1f}",
        )
    console.print(table)
    limit = baseline["duplicates"] * 0.10
    targets = {
        "zero_loss": all(r["lost"] == 0 for r in results),
        "nothing_skipped": all(r["skipped"] == 0 for r in results),
        "duplicates_100ms_a_le_10pct_of_1000ms_plain": best["duplicates"] <= limit,
        "lag_p99_le_50ms": all(r["lag_p99_ms"] <= 50 for r in results),
    }
    for name, met in targets.items():
        console.print(f"target {name}: {'[green]met' if met else '[red]NOT met'}")
    console.print(
        f"duplicates: 100 ms with (a) {best['duplicates']} vs limit {limit:.1f} "
        f"(10% of {baseline['duplicates']} at 1000 ms without (a))"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "rate": args.rate,
        "batching": args.batching,
        "moves": args.moves,
        "results": results,
        "targets": targets,
    }
    args.out.write_text(json.dumps(doc, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
