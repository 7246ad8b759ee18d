"""Re-replication throughput after a bookie is lost, beside the disk's raw copy rate.

    .venv/bin/python bench/bench_recovery.py              # 1 GiB of entries (a few minutes)
    .venv/bin/python bench/bench_recovery.py --gib 0.25   # a quicker look

Four bookie processes on a real ZooKeeper (loopback), E=3/Qw=2/Qa=2 ledgers of 64 KiB entries,
closed. One bookie is killed -9; auto-recovery (grace period 0) copies every entry it held to
the others. Measured: the bytes re-replicated over the time from the first under-replication
mark to the last one cleared, and, in the same run, the raw rate of copying a file on the same
disk (read + write + fsync), the physical limit of any copy. Target: >= 50% of raw.
Prints a table and writes bench/results/bench_recovery.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
from local_storage import LocalStorageCluster

from magnetar.bookie.autorecovery.marks import UnderReplication
from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.bookie.layout import UNDER_REPLICATED

console = Console()
RESULTS = Path(__file__).parent / "results" / "bench_recovery.json"
ENTRY = 64 * 1024
LEDGER_ENTRIES = 2048  # 128 MiB ledgers


def raw_copy_rate(workdir: Path, size: int) -> float:
    """MiB/s of copying a freshly written file on this disk: read (mostly from the page cache, as
    the bookies' reads of fresh entries are), write, fsync."""
    source, target = workdir / "raw-src", workdir / "raw-dst"
    block = os.urandom(1 << 20)
    with open(source, "wb") as out:
        for _ in range(size >> 20):
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    start = time.perf_counter()
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    elapsed = time.perf_counter() - start
    source.unlink()
    target.unlink()
    return (size >> 20) / elapsed


async def write(client: LedgerClient, total: int) -> list[int]:
    payload = os.urandom(ENTRY)
    ids: list[int] = []
    written = 0
    while written < total:
        writer = await client.create_ledger(3, 2, 2)
        futures = [
            writer.add_entry_async(payload) for _ in range(min(LEDGER_ENTRIES, (total - written) // ENTRY))
        ]
        await asyncio.gather(*futures)
        await writer.close()
        written += len(futures) * ENTRY
        ids.append(writer.ledger_id)
        console.print(f"  wrote {written >> 20} MiB")
    return ids


async def held_bytes(client: LedgerClient, ids: list[int], bookie: str) -> int:
    total = 0
    for ledger_id in ids:
        metadata = await client.ledger_metadata(ledger_id)
        held = sum(1 for e in range(metadata.last_entry_id + 1) if bookie in metadata.write_set(e))
        total += held * ENTRY
    return total


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    size = int(args.gib * (1 << 30))
    console.print("[bold]disk[/]: raw copy rate …")
    raw = raw_copy_rate(workdir, min(size, 1 << 30))
    settings = {
        "lost_bookie_recovery_delay": "0",
        "zk_timeout": "2000",
        "replication_worker_poll_interval": "0.2",
    }
    async with LocalStorageCluster(workdir / "cluster", bookies=4, **settings) as cluster:
        store = await cluster.open_store()
        client = LedgerClient(store, LedgerClientConfig(ensemble_size=3, write_quorum=2, ack_quorum=2))
        console.print(f"[bold]writing[/] {size >> 20} MiB in 64 KiB entries, E=3 Qw=2 Qa=2 …")
        ids = await write(client, size)
        victim = cluster.addresses[0]
        to_copy = await held_bytes(client, ids, victim)
        marks = UnderReplication(store)
        console.print(f"[bold]kill -9[/] {victim} (held {to_copy >> 20} MiB) …")
        changed = asyncio.Event()
        store.watch(UNDER_REPLICATED, lambda _event: changed.set(), children=True)
        await store.exists(UNDER_REPLICATED)

        async def until(predicate: Callable[[list[int]], bool]) -> float:
            while not predicate(await marks.ledgers()):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 1.0)
                changed.clear()
            return time.perf_counter()

        killed = time.perf_counter()
        await asyncio.to_thread(cluster.kill, 0)
        marked = await until(bool)
        done = await until(lambda ledgers: not ledgers)
        await client.close()
        await store.close()
    rate = (to_copy >> 20) / (done - marked)
    return {
        "raw_copy_mib_s": raw,
        "re_replicated_mib": to_copy >> 20,
        "detection_s": marked - killed,
        "replication_s": done - marked,
        "replication_mib_s": rate,
        "fraction_of_raw": rate / raw,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gib", type=float, default=1.0, help="GiB of entries to write (default 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-", dir=os.environ.get("BENCH_DIR")) as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    table = Table(title="re-replication after a lost bookie (64 KiB entries)")
    for column in ("raw copy MiB/s", "re-replicated MiB", "detection s", "replication s", "MiB/s", "of raw"):
        table.add_column(column, justify="right")
    table.add_row(
        f"{result['raw_copy_mib_s']:,.0f}",
        f"{result['re_replicated_mib']:,}",
        f"{result['detection_s']:.1f}",
        f"{result['replication_s']:.1f}",
        f"{result['replication_mib_s']:,.1f}",
        f"{result['fraction_of_raw']:.0%}",
    )
    console.print(table)
    console.print("target: >= 50% of the raw copy rate")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    console.print(f"results: {RESULTS}")


if __name__ == "__main__":
    main()
