"""``magnetar chaos``: run Chaos Toolkit experiments against a Magnetar (or Pulsar) cluster."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from magnetar.chaos import run as chaos_run

console = Console()


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar chaos validate chaos/experiments/bundle-unload.yaml
  magnetar chaos run chaos/experiments/bookie-loss.yaml
  magnetar chaos run chaos/experiments/bundle-unload.yaml --cluster-dir runs/demo/cluster
  magnetar chaos run chaos/experiments/bundle-unload.yaml --target local \\
      --service-url pulsar://127.0.0.1:6650 --admin-url http://127.0.0.1:8080""",
)
def chaos() -> None:
    """Chaos experiments (Chaos Toolkit underneath); each run lands in runs/<run id>/."""


@chaos.command()
@click.argument("experiment", type=click.Path(dir_okay=False, path_type=Path))
def validate(experiment: Path) -> None:
    """Check an experiment file without running it."""
    try:
        loaded = chaos_run.load(experiment)
    except chaos_run.ExperimentError as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"{experiment}: valid ({loaded.get('title', 'untitled')})")


@chaos.command()
@click.argument("experiment", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--target", type=click.Choice(["local", "kubernetes"]), default="local", show_default=True)
@click.option("--cluster-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Local cluster to break (default: the one `magnetar local up` started last).")  # fmt: skip
@click.option(
    "--service-url", default=None, help="Pulsar service URL of the cluster (any Pulsar-protocol cluster)."
)
@click.option("--admin-url", default=None, help="Admin REST URL of the cluster.")
@click.option(
    "--run-id", default=None, help="Name of the run directory under runs/ (default: experiment-time)."
)
def run(
    experiment: Path,
    target: str,
    cluster_dir: Path | None,
    service_url: str | None,
    admin_url: str | None,
    run_id: str | None,
) -> None:
    """Run an experiment and gather its journal, events and cluster logs in runs/<run id>/."""
    try:
        loaded = chaos_run.load(experiment)
    except chaos_run.ExperimentError as exc:
        raise click.ClickException(str(exc)) from exc
    if cluster_dir is None and target == "local":
        latest = Path("runs/latest-cluster")
        cluster_dir = latest.resolve() if latest.exists() else None
    run_dir = chaos_run.new_run_dir(experiment, run_id)
    _show_progress()
    console.print(f"[bold]run[/] {run_dir}")
    journal = chaos_run.execute(
        loaded, run_dir, chaos_run.Target(target, cluster_dir, service_url, admin_url)
    )
    result = chaos_run.summary(journal)
    _print_summary(result, run_dir)
    if result["status"] != "completed":
        raise SystemExit(1)


def _show_progress() -> None:
    """Chaos Toolkit reports each activity on its logger: show those lines as they happen."""
    handler = RichHandler(console=console, show_path=False, show_level=False, markup=False)
    logger = logging.getLogger("chaostoolkit")
    logger.setLevel(logging.INFO)
    if not any(isinstance(h, RichHandler) for h in logger.handlers):
        logger.addHandler(handler)


def _print_summary(result: dict[str, Any], run_dir: Path) -> None:
    table = Table(
        "activity", "type", "status", "seconds", "error", title=f"{run_dir.name}: {result['status']}"
    )
    for activity in result["activities"]:
        duration = activity["duration_s"]
        table.add_row(
            str(activity["name"]), str(activity["type"]), str(activity["status"]),
            f"{duration:.1f}" if isinstance(duration, float) else "", str(activity["error"] or ""),
        )  # fmt: skip
    console.print(table)
    console.print(
        f"hypothesis before: {result['hypothesis_before']}, after: {result['hypothesis_after']}; "
        f"journal: {run_dir / 'journal.json'}"
    )
    (run_dir / "chaos-summary.json").write_text(json.dumps(result, indent=2, default=str))
