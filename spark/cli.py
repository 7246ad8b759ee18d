"""``magnetar postmortem``: the Spark post-mortem of a chaos-lab run."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

#: exit statuses: CI gates on a loss
EXIT_BAD_INPUT, EXIT_LOSS = 2, 3
#: how many lost uids are printed
SHOWN = 20

if TYPE_CHECKING:  # pyarrow and pyspark: an extra, which `magnetar --help` must not need
    from magnetar.spark.location import Location
    from magnetar.spark.postmortem import Result

console = Console(stderr=True, highlight=False, soft_wrap=True)


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="""\b
Examples:
  magnetar postmortem runs/bundle-unload-20261122T101500Z
  magnetar postmortem runs/demo-*-bundle-unload runs/demo-*-region-outage   # one session
  magnetar postmortem runs/magnetar-run --compare runs/pulsar-run   # side by side
  magnetar postmortem runs/a --threshold-ms 100 --out /tmp/report-a
  magnetar postmortem runs/a --master spark://spark-master:7077      # on a Spark cluster
  magnetar postmortem hdfs://nn:8020/runs/a --out hdfs://nn:8020/reports/a --master yarn
\b
Writes RUN_DIR/report/: Parquet tables (windows, duplicates, losses, reorders, latency,
throughput, gaps, bad_lines), summary.json (schema magnetar.postmortem/v1) and report.html.
RUN_DIR and --out are local paths or URIs (file://, hdfs://, s3a://: a filesystem both pyarrow,
on this machine, and the Spark cluster can open).
\b
Exit status: 0 fine; 3 an acknowledged message was lost (the uids are printed);
2 bad input (missing run directory, unreadable journal.json, unknown event schema version,
a URI whose filesystem cannot be opened).""",
)
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...")
@click.option("--compare", "other", metavar="RUN_DIR", help="A second run to put side by side.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL (passed through).")
@click.option(
    "--threshold-ms",
    type=click.FloatRange(min=0),
    default=50.0,
    show_default=True,
    help="Shortest disruption window reported.",
)
@click.option("--out", metavar="DIR", help="Report directory, a path or a URI  [default: RUN_DIR/report]")
def postmortem(
    run_dirs: tuple[str, ...], other: str | None, master: str, threshold_ms: float, out: str | None
) -> None:
    """Disruption windows, duplicates, losses, reorders, latency and throughput of a chaos-lab run
    (events/*.jsonl and journal.json), computed with PySpark. Several runs are analysed one after
    the other in one Spark session, each into its own RUN_DIR/report."""
    from magnetar.spark.errors import BadInputError

    if len(run_dirs) > 1 and (out is not None or other is not None):
        raise click.UsageError("--out and --compare take one RUN_DIR")
    started = time.monotonic()

    def status(message: str) -> None:
        console.print(f"[dim]{time.monotonic() - started:6.1f}s[/] {message}")

    try:
        results, compared = _analyse(run_dirs, other, master, threshold_ms, out, status)
    except BadInputError as exc:
        console.print(f"[bold red]bad input:[/] {exc}")
        sys.exit(EXIT_BAD_INPUT)
    for result in results:
        console.print(f"report: [bold]{result.report}[/]")
        console.print(f"summary: {result.out / 'summary.json'}")
    if compared is not None:
        console.print(f"comparison: [bold]{compared}[/]")
    lossy = [result for result in results if result.losses]
    for result in lossy:
        _lost(result.summary)
    if lossy:
        sys.exit(EXIT_LOSS)


def _analyse(
    run_dirs: tuple[str, ...],
    other: str | None,
    master: str,
    threshold_ms: float,
    out: str | None,
    status: Callable[[str], None],
) -> tuple[list[Result], Location | None]:
    """The post-mortem of each run (and of --compare's), in one session; the comparison page."""
    from magnetar.spark import postmortem as job
    from magnetar.spark.ingest import event_files
    from magnetar.spark.journal import read_faults
    from magnetar.spark.location import Location
    from magnetar.spark.session import SMALL_INPUT_BYTES

    # bad input is reported before paying for a JVM
    logged = 0
    for directory in (*run_dirs, *([other] if other else [])):
        logged += sum(f.size() for f in event_files(directory))
        read_faults(directory)
    report_dir = Location.of(out) if out is not None else None
    status(f"starting Spark ({master})")
    from pyspark.sql import SparkSession

    from magnetar.spark.session import spark_session

    # a caller's session (a notebook, a test) is used and left running
    borrowed = SparkSession.getActiveSession() is not None
    runs = len(run_dirs) + (other is not None)
    spark = spark_session(
        master, small_input=logged <= SMALL_INPUT_BYTES, runs=runs, run_bytes=logged // max(runs, 1)
    )
    try:
        results = [
            job.run(run_dir, spark, threshold_ms=threshold_ms, out=report_dir, status=status)
            for run_dir in run_dirs
        ]
        compared = None
        if other is not None:
            second = job.run(other, spark, threshold_ms=threshold_ms, status=status)
            from magnetar.spark.report import render_compare

            compared = results[0].out / f"compare-{second.summary['run']}.html"
            compared.write_text(render_compare(results[0].summary, second.summary))
            _headline([results[0].summary, second.summary])
        else:
            _headline([result.summary for result in results])
    finally:
        if not borrowed:
            spark.stop()
    return results, compared


def _headline(summaries: list[dict[str, Any]]) -> None:
    table = Table(title="post-mortem", title_justify="left")
    table.add_column("measure")
    for summary in summaries:
        table.add_column(summary["run"], justify="right")
    for key in summaries[0]["headline"]:
        cells = [_fmt(s["headline"].get(key)) for s in summaries]
        style = (
            "red"
            if key in ("losses", "bad_lines") and any(s["headline"].get(key) for s in summaries)
            else None
        )
        table.add_row(key.replace("_", " "), *cells, style=style)
    console.print(table)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _lost(summary: dict[str, Any]) -> None:
    losses = summary["losses"]
    console.print(f"[bold red]{losses['count']:,} acknowledged messages were never received[/]")
    for entry in losses["by_subscription"]:
        shown = ", ".join(entry["examples"][:SHOWN])
        more = (
            f" (+{entry['count'] - len(entry['examples'][:SHOWN]):,} more)" if entry["count"] > SHOWN else ""
        )
        console.print(f"  {entry['topic']} / {entry['subscription']}: {entry['count']:,} lost: {shown}{more}")
