"""Bookie add throughput and latency, beside the disk's own limits.

    .venv/bin/python bench/bookie_add.py                 # full run (about two minutes)
    .venv/bin/python bench/bookie_add.py --seconds 5     # shorter phases
    .venv/bin/python bench/bookie_add.py --profile       # also write a pyinstrument profile of the client

What it measures, with 1 KiB entries and fsync on (journal_sync_data):
  * the disk: raw fsync rate (1 KiB write + fsync, one at a time) and sequential write bandwidth,
    the physical limits that group commit works against;
  * E=Qw=Qa=1 on one bookie process and E=3/Qw=2/Qa=2 on three, pipelined at full speed:
    entries/s and add latency p50/p99/p99.9;
  * E=3/Qw=2/Qa=2 at a fixed 5,000 entries/s: add latency p50/p99/p99.9.
Each phase first adds 2,000 entries unmeasured (connections to the ensemble, warm pipes).
Targets: >= 20,000 entries/s with E=3/Qw=2/Qa=2; p99 <= 10 ms at 5,000 entries/s.
Everything runs on loopback: a real ZooKeeper and real bookie processes, stopped at the end.
Prints a table and writes bench/results/bookie_add.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
from local_storage import LocalStorageCluster

from magnetar.bookie.client import LedgerClient, LedgerClientConfig, LedgerHandle

console = Console()
RESULTS = Path(__file__).parent / "results" / "bookie_add.json"
ENTRY = os.urandom(1024)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def disk_limits(directory: Path, seconds: float) -> dict[str, float]:
    """Raw fsync rate and sequential write bandwidth of the disk under ``directory``."""
    path = directory / "disk-probe"
    block = os.urandom(1024)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            os.write(fd, block)
            os.fsync(fd)
            count += 1
        fsyncs = count / (time.perf_counter() - start)
        os.lseek(fd, 0, os.SEEK_SET)
        chunk = os.urandom(1 << 20)
        total, start = 0, time.perf_counter()
        while total < 512 << 20 and time.perf_counter() - start < seconds * 2:
            total += os.write(fd, chunk)
        os.fsync(fd)
        bandwidth = total / (time.perf_counter() - start) / (1 << 20)
    finally:
        os.close(fd)
        path.unlink()
    return {"fsync_per_s": fsyncs, "seq_write_mib_s": bandwidth}


async def warm_up(writer: LedgerHandle) -> None:
    """Connect to the ensemble and fill the pipes before measuring: connection set-up is a
    one-off cost of a new ledger's first adds, not the steady-state latency being measured."""
    await asyncio.gather(*(writer.add_entry_async(ENTRY) for _ in range(2000)))


async def pipelined(
    client: LedgerClient, e: int, qw: int, qa: int, seconds: float, window: int
) -> dict[str, Any]:
    """Add as fast as possible with ``window`` adds in flight."""
    writer = await client.create_ledger(e, qw, qa)
    await warm_up(writer)
    latencies: list[float] = []
    in_flight: set[asyncio.Future[int]] = set()
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()

    def record(sent: float) -> Any:
        return lambda _f: latencies.append((time.perf_counter() - sent) * 1000)

    while time.perf_counter() < deadline:
        while len(in_flight) < window:
            future = writer.add_entry_async(ENTRY)
            future.add_done_callback(record(time.perf_counter()))
            in_flight.add(future)
        done, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
        for future in done:
            future.result()
    await asyncio.gather(*in_flight)
    elapsed = time.perf_counter() - start
    await writer.close()
    return summarize(f"E={e} Qw={qw} Qa={qa}, {window} in flight", len(latencies), elapsed, latencies)


async def fixed_rate(client: LedgerClient, rate: int, seconds: float) -> dict[str, Any]:
    """Add at a steady ``rate`` and measure latency (the open-loop view a broker sees)."""
    writer = await client.create_ledger(3, 2, 2)
    await warm_up(writer)
    latencies: list[float] = []
    futures = []
    start = time.perf_counter()
    tick = 0.001
    sent = 0
    while (now := time.perf_counter()) - start < seconds:
        due = int((now - start) * rate)
        while sent < due:
            stamp = time.perf_counter()
            future = writer.add_entry_async(ENTRY)
            future.add_done_callback(lambda _f, s=stamp: latencies.append((time.perf_counter() - s) * 1000))
            futures.append(future)
            sent += 1
        await asyncio.sleep(tick)
    await asyncio.gather(*futures)
    elapsed = time.perf_counter() - start
    await writer.close()
    return summarize(f"E=3 Qw=2 Qa=2 at {rate:,}/s", len(latencies), elapsed, latencies)


def summarize(name: str, count: int, elapsed: float, latencies: list[float]) -> dict[str, Any]:
    return {
        "scenario": name,
        "entries": count,
        "entries_per_s": count / elapsed,
        "mib_per_s": count * len(ENTRY) / elapsed / (1 << 20),
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "p999_ms": percentile(latencies, 0.999),
        "mean_ms": statistics.fmean(latencies) if latencies else float("nan"),
    }


@asynccontextmanager
async def ledger_client(cluster: LocalStorageCluster) -> AsyncIterator[LedgerClient]:
    store = await cluster.open_store()
    try:
        async with LedgerClient(
            store, LedgerClientConfig(ensemble_size=3, write_quorum=2, ack_quorum=2)
        ) as c:
            yield c
    finally:
        await store.close()


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    console.print("[bold]disk[/]: measuring raw fsync rate and sequential bandwidth …")
    disk = disk_limits(workdir, min(args.seconds, 3.0))
    rows: list[dict[str, Any]] = []
    async with LocalStorageCluster(workdir / "one", bookies=1) as cluster, ledger_client(cluster) as client:
        console.print("[bold]E=Qw=Qa=1[/] on one bookie …")
        rows.append(await pipelined(client, 1, 1, 1, args.seconds, args.window))
    async with LocalStorageCluster(workdir / "three", bookies=3) as cluster, ledger_client(cluster) as client:
        console.print("[bold]E=3 Qw=2 Qa=2[/] on three bookies …")
        if args.profile:
            from pyinstrument import Profiler

            profiler = Profiler(async_mode="enabled")
            profiler.start()
        rows.append(await pipelined(client, 3, 2, 2, args.seconds, args.window))
        if args.profile:
            profiler.stop()
            out = RESULTS.with_name("bookie_add_client_profile.html")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(profiler.output_html())
            console.print(f"client profile: {out}")
    # A fresh cluster: the saturation run above leaves bookies flushing a backlog of entry logs.
    async with LocalStorageCluster(workdir / "rate", bookies=3) as cluster, ledger_client(cluster) as client:
        console.print(f"[bold]E=3 Qw=2 Qa=2 at {args.rate:,}/s[/] …")
        rows.append(await fixed_rate(client, args.rate, args.seconds))
    return {"disk": disk, "runs": rows}


def print_table(result: dict[str, Any]) -> None:
    disk = result["disk"]
    console.print(
        f"disk: {disk['fsync_per_s']:,.0f} fsync/s (1 KiB, one at a time), "
        f"{disk['seq_write_mib_s']:,.0f} MiB/s sequential"
    )
    table = Table(title="bookie adds, 1 KiB entries, fsync on")
    for column in ("scenario", "entries/s", "MiB/s", "p50 ms", "p99 ms", "p99.9 ms"):
        table.add_column(column, justify="left" if column == "scenario" else "right")
    for row in result["runs"]:
        table.add_row(
            row["scenario"],
            f"{row['entries_per_s']:,.0f}",
            f"{row['mib_per_s']:.1f}",
            f"{row['p50_ms']:.2f}",
            f"{row['p99_ms']:.2f}",
            f"{row['p999_ms']:.2f}",
        )
    console.print(table)
    console.print("targets: >= 20,000 entries/s with E=3/Qw=2/Qa=2; p99 <= 10 ms at 5,000 entries/s")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase (default 10)")
    parser.add_argument(
        "--window", type=int, default=2000, help="adds in flight when pipelining (default 2000)"
    )
    parser.add_argument(
        "--rate", type=int, default=5000, help="fixed rate of the latency phase (default 5000/s)"
    )
    parser.add_argument("--profile", action="store_true", help="profile the client with pyinstrument")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-", dir=os.environ.get("BENCH_DIR")) as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    result["machine"] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }
    print_table(result)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    console.print(f"results: {RESULTS}")


if __name__ == "__main__":
    main()
