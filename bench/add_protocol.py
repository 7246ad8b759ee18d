"""What an add request costs over gRPC's AddEntries stream and over the bookie's framed add port.

    .venv/bin/python bench/add_protocol.py
    .venv/bin/python bench/add_protocol.py --requests 20000 --entries 1 8
    .venv/bin/python bench/add_protocol.py --protocols framed --entries 1   # one row (to profile)

One bookie process (journal fsync off: the protocol is measured, not the disk) and the ledger
client's ``BookieConnection`` in this process, adding 1 KiB entries in rounds: each round queues
``--entries`` entries in one loop turn (so they leave as one request) and waits for all of them,
one request in flight. For each protocol and request size: CPU per request of the bookie process
(/proc, all its threads) and of this process (the client's side, gRPC's threads included), and
the wall time of a round. The floor row is the bookie's CPU over the same seconds with nothing
sent. The request shape is fixed, so the figures hold on a busy machine too, where a broker's
own batching would change them. Prints a table and writes runs/bench/add_protocol.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import cpu_seconds, stop_process
from rich.console import Console
from rich.table import Table

from magnetar.bookie.client.add_request import EncodedEntry
from magnetar.bookie.client.bookie_connection import BookieConnection
from magnetar.bookie.digest import entry_digest
from magnetar.common.ports import free_port
from magnetar.proto import bookie_pb2 as pb

console = Console()
RESULTS = Path("runs/bench/add_protocol.json")
PAYLOAD = os.urandom(1024)


class BookieProcess:
    def __init__(self, root: Path) -> None:
        self.port, self.add_port = free_port(), free_port()
        command = [
            sys.executable, "-m", "magnetar", "bookie", "--port", str(self.port),
            "--journal-dir", str(root / "journal"), "--ledger-dir", str(root / "ledgers"),
            "--set", "journal_sync_data=false", "--set", f"bookie_add_port={self.add_port}",
            "--set", "prometheus_stats_http_port=0", "--log-level", "WARNING",
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("bookie ready"):
                break
        else:
            raise RuntimeError("the bookie exited before it was ready")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process(self.process)


def entry(ledger_id: int, entry_id: int) -> EncodedEntry:
    lac = entry_id - 1
    return EncodedEntry.of(
        pb.Entry(
            ledger_id=ledger_id,
            entry_id=entry_id,
            last_add_confirmed=lac,
            digest=entry_digest(ledger_id, entry_id, lac, PAYLOAD),
            payload=PAYLOAD,
        )
    )


async def run_rounds(
    bookie: BookieProcess, framed: bool, ledger_id: int, rounds: int, size: int
) -> dict[str, Any]:
    add_address = f"127.0.0.1:{bookie.add_port}"

    async def find_add_port(_: str) -> str:
        return add_address

    connection = BookieConnection(
        bookie.address, bookie.address, find_add_port=find_add_port if framed else None
    )
    entries = [entry(ledger_id, i) for i in range(rounds * size + 200 * size)]
    try:
        await rounds_of(connection, entries[: 200 * size], size)  # warm: connection, stream, pages
        measured = entries[200 * size :]
        bookie_before, client_before, started = (
            cpu_seconds(bookie.process.pid),
            time.process_time(),
            time.perf_counter(),
        )
        await rounds_of(connection, measured, size)
        wall = time.perf_counter() - started
        bookie_cpu = cpu_seconds(bookie.process.pid) - bookie_before
        client_cpu = time.process_time() - client_before
    finally:
        await connection.close()
    return {
        "protocol": "framed" if framed else "gRPC",
        "entries_per_request": size,
        "requests": rounds,
        "bookie_us_per_request": bookie_cpu / rounds * 1e6,
        "client_us_per_request": client_cpu / rounds * 1e6,
        "round_ms": wall / rounds * 1e3,
        "wall_s": wall,
    }


async def rounds_of(connection: BookieConnection, entries: list[EncodedEntry], size: int) -> None:
    for start in range(0, len(entries), size):
        futures = [connection.add(e, b"") for e in entries[start : start + size]]
        await asyncio.gather(*futures)


def floor(bookie: BookieProcess, seconds: float) -> float:
    before = cpu_seconds(bookie.process.pid)
    time.sleep(seconds)
    return (cpu_seconds(bookie.process.pid) - before) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--requests", type=int, default=10_000, help="measured requests per row (default 10000)"
    )
    parser.add_argument(
        "--entries", type=int, nargs="+", default=[1, 8], help="entries per request (default 1 8)"
    )
    parser.add_argument(
        "--protocols",
        nargs="+",
        choices=["grpc", "framed"],
        default=["grpc", "framed"],
        help="(default both)",
    )
    args = parser.parse_args()
    # a terminated bench still stops its bookie (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="add-protocol-") as tmp:
        bookie = BookieProcess(Path(tmp))
        try:
            idle = floor(bookie, 3.0)
            ledger_id = 1
            for size in args.entries:
                for framed in [protocol == "framed" for protocol in args.protocols]:
                    console.print(f"[dim]{'framed' if framed else 'gRPC'}, {size} entries a request …[/]")
                    rows.append(asyncio.run(run_rounds(bookie, framed, ledger_id, args.requests, size)))
                    ledger_id += 1
        finally:
            bookie.stop()
    table = Table(
        title=f"an add request's CPU, one in flight, 1 KiB entries (bookie idle: {idle * 1e3:.1f} ms CPU/s)"
    )
    for column in (
        "protocol",
        "entries/request",
        "bookie µs/request",
        "client µs/request",
        "µs/entry (both)",
        "round ms",
    ):
        table.add_column(column, justify="right")
    for row in rows:
        both = (row["bookie_us_per_request"] + row["client_us_per_request"]) / row["entries_per_request"]
        table.add_row(
            row["protocol"], str(row["entries_per_request"]), f"{row['bookie_us_per_request']:.0f}",
            f"{row['client_us_per_request']:.0f}", f"{both:.0f}", f"{row['round_ms']:.2f}",
        )  # fmt: skip
    console.print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    RESULTS.write_text(
        json.dumps({"rows": rows, "bookie_idle_cpu_per_s": idle, "load_average": load}, indent=2)
    )
    console.print(f"load average {load:.1f}; JSON: {RESULTS}")


if __name__ == "__main__":
    main()
