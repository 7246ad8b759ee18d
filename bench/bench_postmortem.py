"""Time of the whole Spark post-mortem (local[2]) on generated event logs of 1M, 3M and 10M events.

    .venv/bin/python bench/bench_postmortem.py                  # 1M, 3M, 10M
    .venv/bin/python bench/bench_postmortem.py --sizes 1M 3M    # a quicker look
    .venv/bin/python bench/bench_postmortem.py --keep /tmp/pm   # keep (and reuse) the generated runs

Logs come from magnetar.spark.bulk (four topics, two faults with producer stalls, a few
duplicates). The SparkSession is started once, before timing; each size is timed from reading the
logs to report.html. Target (issue 6): <= 60 s for 10M events and near-linear growth.
Prints a table and writes bench/results/bench_postmortem.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from magnetar.spark import bulk, postmortem
from magnetar.spark.session import spark_session

console = Console()
RESULTS = Path(__file__).parent / "results" / "bench_postmortem.json"
SIZES = {"1M": 1_000_000, "3M": 3_000_000, "10M": 10_000_000}


def generate(root: Path, label: str, events: int) -> tuple[Path, int, float]:
    run_dir = root / f"bench-{label}"
    marker = run_dir / "events.count"
    if marker.exists():
        return run_dir, int(marker.read_text()), 0.0
    shutil.rmtree(run_dir, ignore_errors=True)
    started = time.perf_counter()
    written = bulk.write(run_dir, events)
    elapsed = time.perf_counter() - started
    marker.write_text(str(written))
    return run_dir, written, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", type=Path, help="where to write (and reuse) the generated runs")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-postmortem-"))
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    spark = spark_session(args.master)
    session_s = time.perf_counter() - started
    rows: list[dict[str, Any]] = []
    try:
        for label in args.sizes:
            run_dir, events, generated_s = generate(root, label, SIZES[label])
            console.print(f"[dim]{label}: {events:,} events ({generated_s:.1f} s to generate); analysing[/]")
            began = time.perf_counter()

            def status(message: str, began: float = began) -> None:
                console.print(f"[dim]  {time.perf_counter() - began:6.1f} s  {message}[/]")

            result = postmortem.run(run_dir, spark, status=status)
            seconds = time.perf_counter() - began
            head = result.summary["headline"]
            assert head["events"] == events, (head["events"], events)
            rows.append(
                {
                    "size": label,
                    "events": events,
                    "seconds": round(seconds, 2),
                    "events_per_s": round(events / seconds),
                    "generate_s": round(generated_s, 2),
                    "windows": head["windows"],
                    "duplicates": head["duplicates_same_region"],
                }
            )
    finally:
        spark.stop()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    table = Table(title=f"post-mortem, {args.master} (session start {session_s:.1f} s, not included)")
    for column in ("size", "events", "seconds", "events/s", "windows", "duplicates"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            row["size"], f"{row['events']:,}", f"{row['seconds']:.1f}", f"{row['events_per_s']:,}",
            f"{row['windows']:,}", f"{row['duplicates']:,}",
        )  # fmt: skip
    console.print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps({"master": args.master, "session_s": round(session_s, 2), "runs": rows}, indent=2)
    )
    console.print(f"written {RESULTS}")


if __name__ == "__main__":
    main()
