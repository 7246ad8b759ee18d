"""The broker's memory under connections that never finish a frame (a probe).

    .venv/bin/python bench/connection_memory.py                    # 40 connections, ~5 MB each
    .venv/bin/python bench/connection_memory.py --connections 100 --settle 30

Starts `magnetar standalone`, measures its RSS idle, then opens N raw connections that each
announce a frame just under the 5 MB limit (``max_message_size`` plus padding) and send all of it
but the last byte; measures RSS while they hold, closes them, waits ``--settle`` seconds and
measures again. Targets: RSS after close within 10 % of idle; a frame over the limit refused
before it is read (the connection closed with an error, nothing buffered). Prints a table and
writes bench/results/connection_memory.json.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).parent / "results" / "connection_memory.json"
READY = re.compile(r"standalone ready service_url=pulsar://([\d.]+):(\d+)")
#: just under Pulsar's default maxMessageSize (5 MiB) plus its frame padding
FRAME_BYTES = 5 * 1024 * 1024
console = Console()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_standalone(data_dir: Path) -> tuple[subprocess.Popen[str], tuple[str, int]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "magnetar", "standalone", "--data-dir", str(data_dir), "--port", "0",
         "--web-port", "0", "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    for line in process.stdout:
        if found := READY.search(line):
            return process, (found.group(1), int(found.group(2)))
    raise SystemExit("standalone did not start")


def hold_partial_frames(address: tuple[str, int], count: int) -> list[socket.socket]:
    """``count`` connections, each with a frame announced and all but its last byte sent."""
    held = []
    body = b"\0" * (FRAME_BYTES - 1)
    for _ in range(count):
        sock = socket.create_connection(address, timeout=10)
        sock.sendall(struct.pack(">I", FRAME_BYTES) + body)
        held.append(sock)
    return held


def refused_oversized(address: tuple[str, int]) -> bool:
    """A frame announced over the limit: the broker answers and closes without reading it."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(struct.pack(">I", 1024 * 1024 * 1024))
        sock.settimeout(5)
        try:
            while sock.recv(65536):
                pass
        except TimeoutError:
            return False
        return True


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=40, help="connections holding a partial frame")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to wait after closing them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="magnetar-connmem-") as tmp:
        process, address = start_standalone(Path(tmp))
        try:
            time.sleep(2)
            idle = rss_mb(process.pid)
            console.print(f"idle RSS {idle:.0f} MB; opening {args.connections} connections")
            held = hold_partial_frames(address, args.connections)
            time.sleep(2)
            holding = rss_mb(process.pid)
            for sock in held:
                sock.close()
            console.print(f"holding {holding:.0f} MB; closed, settling {args.settle:.0f} s")
            time.sleep(args.settle)
            after = rss_mb(process.pid)
            oversized = refused_oversized(address)
        finally:
            process.terminate()
            process.wait(30)
    result: dict[str, Any] = {
        "connections": args.connections,
        "frame_bytes": FRAME_BYTES,
        "rss_idle_mb": round(idle, 1),
        "rss_holding_mb": round(holding, 1),
        "rss_after_close_mb": round(after, 1),
        "after_close_within_10_percent": after <= idle * 1.1,
        "oversized_frame_refused": oversized,
    }
    table = Table(title="broker memory under partial frames")
    for column in ("measure", "figure", "target"):
        table.add_column(column)
    table.add_row("RSS idle", f"{idle:.0f} MB", "")
    table.add_row(f"RSS, {args.connections} partial frames held", f"{holding:.0f} MB", "")
    table.add_row(f"RSS {args.settle:.0f} s after closing", f"{after:.0f} MB", f"<= {idle * 1.1:.0f} MB")
    table.add_row("1 GB frame announced", "refused" if oversized else "NOT refused", "refused")
    console.print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    if not (result["after_close_within_10_percent"] and oversized):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
