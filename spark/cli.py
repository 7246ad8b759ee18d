"""``magnetar postmortem``: the Spark post-mortem of a chaos-lab run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

console = Console(stderr=True)

#: exit statuses: CI can gate on a loss
EXIT_LOSS = 3
EXIT_BAD_INPUT = 2


@click.command(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar postmortem runs/bundle-unload-20261122T101500Z
  magnetar postmortem runs/a --compare runs/b          # side by side (e.g. Magnetar vs Pulsar)
  magnetar postmortem runs/a --master spark://spark-master:7077 --threshold-ms 100
Exit status: 0 fine, 3 when an acknowledged message was lost (the uids are listed), 2 bad input.""",
)
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--compare", "other", type=click.Path(path_type=Path), default=None, help="A second run to compare."
)
@click.option("--master", default="local[*]", show_default=True, help="Spark master.")
@click.option(
    "--threshold-ms", type=float, default=50.0, show_default=True, help="Shortest disruption window."
)
@click.option(
    "--out", type=click.Path(path_type=Path), default=None, help="Report directory (default RUN_DIR/report)."
)
def postmortem(run_dir: Path, other: Path | None, master: str, threshold_ms: float, out: Path | None) -> None:
    """Disruption windows, duplicates, losses, reorders, latency and throughput of a run:
    Parquet tables, summary.json and a standalone report.html in RUN_DIR/report/."""
    from magnetar.spark import postmortem as job
    from magnetar.spark import report
    from magnetar.spark.ingest import BadInputError
    from magnetar.spark.session import spark_session

    spark = spark_session(master)
    try:
        summary = job.run(
            run_dir,
            spark,
            threshold_ms=threshold_ms,
            out=out,
            on_status=lambda msg: console.print(f"[dim]{msg}[/]"),
        )
        target = out or run_dir / "report"
        if other is not None:
            second = job.run(other, spark, threshold_ms=threshold_ms, on_status=lambda msg: None)
            compare = target / f"compare-{other.name}.html"
            compare.write_text(report.render_compare(summary, second))
            console.print(f"comparison: {compare}")
    except BadInputError as exc:
        console.print(f"[red]bad input:[/] {exc}")
        sys.exit(EXIT_BAD_INPUT)
    finally:
        spark.stop()
    _print(summary, target)
    if summary["headline"]["losses"]:
        for loss in summary["losses"]:
            console.print(
                f"[red]lost[/] {loss['count']} on {loss['subscription']}: {', '.join(loss['examples'])}"
            )
        sys.exit(EXIT_LOSS)


def _print(summary: dict[str, object], target: Path) -> None:
    head = summary["headline"]
    assert isinstance(head, dict)
    table = Table("measure", "value", title=f"post-mortem of {summary['run']}")
    for key, value in head.items():
        table.add_row(key, f"{value:,.1f}" if isinstance(value, float) else f"{value:,}")
    console.print(table)
    console.print(f"report: {target / 'report.html'}")
    click.echo(json.dumps({"report": str(target / "report.html"), **head}))
