"""``magnetar chaos``: run Chaos Toolkit experiments against a Magnetar (or Pulsar) cluster."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from magnetar.chaos import run as chaos_run
from magnetar.common.run_directory import Layout

console = Console()
#: the experiments shipped with the lab (chaos/experiments/ in a checkout)
EXPERIMENTS = Path(__file__).resolve().parent / "experiments"
#: what ``make demo`` runs on its two regions: Pulsar's micro-outage, our transfer, and PIP-33
DEMO_EXPERIMENTS = ("bundle-unload", "bundle-transfer", "replicated-subscription-failover", "region-outage")
#: what ``magnetar chaos demo --kube`` runs on one MagnetarCluster (on two: ``DEMO_EXPERIMENTS``)
KUBE_DEMO_EXPERIMENTS = ("bundle-unload", "bundle-transfer", "broker-kill", "bookie-loss")


F = TypeVar("F", bound=Callable[..., Any])


def _kube_cluster_options(command: F) -> F:
    """--kube-cluster and --kubeconfig: which MagnetarClusters a --kube run acts on."""
    command = click.option(
        "--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help="With --kube. Default: $KUBECONFIG, else the one `magnetar kube up` wrote.",
    )(command)  # fmt: skip
    return click.option(
        "--kube-cluster", "kube_clusters", multiple=True, metavar="NAME[@NAMESPACE]",
        help="With --kube: a MagnetarCluster to act on; repeatable (default: all the kubeconfig sees).",
    )(command)  # fmt: skip


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar chaos validate chaos/experiments/bundle-unload.yaml
  magnetar chaos run chaos/experiments/bookie-loss.yaml
  magnetar chaos run chaos/experiments/bundle-unload.yaml --cluster-dir runs/demo/cluster
  magnetar chaos run chaos/experiments/broker-kill.yaml --kube --kube-cluster region-a@default
  magnetar chaos run chaos/experiments/bundle-unload.yaml --target local \\
      --service-url pulsar://127.0.0.1:6650 --admin-url http://127.0.0.1:8080
  magnetar chaos compare bundle-unload broker-kill --against pulsar""",
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
@click.option(
    "--postmortem/--no-postmortem",
    default=True,
    show_default=True,
    help="Analyse the run with `magnetar postmortem` (Spark) once it is over.",
)
@click.option("--kube", is_flag=True, help="Act on the pods of MagnetarClusters (--target kubernetes).")
@_kube_cluster_options
def run(
    experiment: Path,
    target: str,
    cluster_dir: Path | None,
    service_url: str | None,
    admin_url: str | None,
    run_id: str | None,
    postmortem: bool,
    kube: bool,
    kube_clusters: tuple[str, ...],
    kubeconfig: Path | None,
) -> None:
    """Run an experiment and gather its journal, events and cluster logs in runs/<run id>/;
    then write the post-mortem report in runs/<run id>/report/. With --kube, the faults go to the
    pods of MagnetarClusters (kill and freeze their containers, wait for the kubelet to restart
    them) and the pods' logs are gathered."""
    try:
        loaded = chaos_run.load(experiment)
    except chaos_run.ExperimentError as exc:
        raise click.ClickException(str(exc)) from exc
    target = "kubernetes" if kube else target
    if cluster_dir is None and target == "local":
        latest = Path("runs/latest-cluster")
        cluster_dir = latest.resolve() if latest.exists() else None
    try:
        run_dir = chaos_run.new_run_dir(experiment, run_id)
    except FileExistsError as exc:
        raise click.ClickException(str(exc)) from exc
    if target == "kubernetes" and cluster_dir is None:
        cluster_dir = _kube_target(run_dir / Layout.KUBE_TARGET, kubeconfig, kube_clusters)
    _show_progress()
    console.print(f"[bold]run[/] {run_dir}")
    journal = chaos_run.execute(
        loaded, run_dir, chaos_run.Target(target, cluster_dir, service_url, admin_url)
    )
    result = chaos_run.summary(journal)
    _print_summary(result, run_dir)
    analysed = _postmortem(run_dir) if postmortem else 0
    if result["status"] != "completed" or analysed != 0:
        raise SystemExit(1)


def _kube_target(directory: Path, kubeconfig: Path | None, clusters: tuple[str, ...]) -> Path:
    """A cluster directory for the pods of ``clusters`` (magnetar.chaos.pods)."""
    import os

    from chaoslib.exceptions import ActivityFailed

    from magnetar.chaos.pods import target as pod_target
    from magnetar.kube.layout import DEFAULT_STATE_DIR, Layout

    node = Layout(DEFAULT_STATE_DIR)
    config = kubeconfig or Path(os.environ.get("KUBECONFIG") or node.containerd.parent / "kubeconfig")
    socket = Path(os.environ.get("MAGNETAR_CONTAINERD_SOCKET") or node.containerd_socket)
    if not config.exists():
        raise click.ClickException(f"no kubeconfig at {config}: `magnetar kube up`, or --kubeconfig")
    try:
        refs = [pod_target.ClusterRef.parse(c) for c in clusters] or pod_target.discover(config)
        if not refs:
            raise click.ClickException(f"no MagnetarCluster in the cluster of {config}")
        return pod_target.write(directory, config, socket, refs)
    except ActivityFailed as exc:
        raise click.ClickException(str(exc)) from exc


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
        f"journal: {run_dir / Layout.JOURNAL}"
    )
    (run_dir / Layout.CHAOS_SUMMARY).write_text(json.dumps(result, indent=2, default=str))


@chaos.command()
@click.argument("experiments", nargs=-1, required=True, metavar="EXPERIMENT...")
@click.option("--against", type=click.Choice(["pulsar"]), required=True,
              help="The other system: Apache Pulsar's processes (jars fetched once by Maven).")  # fmt: skip
@click.option("--compare-id", default=None,
              help="Name of the comparison's directory under runs/ (default: compare-<time>).")  # fmt: skip
def compare(experiments: tuple[str, ...], against: str, compare_id: str | None) -> None:
    """Run each experiment on a local Magnetar cluster, then on Apache Pulsar's processes (the same
    topology and workload), and print one table: per experiment and system, the acknowledged
    messages lost, duplicates, poll skips, reorders, the longest disruption window and the p99
    end-to-end lateness during the fault, from each run's post-mortem. The table is also written
    to runs/<compare id>/compare.json. An experiment Pulsar's processes cannot take (two regions,
    say) is shown as not supported, with the reason.

    EXPERIMENT is a name under chaos/experiments/ or an experiment file.

    \b
    Examples:
      magnetar chaos compare bundle-unload --against pulsar
      magnetar chaos compare bundle-unload bundle-transfer broker-kill bookie-loss \\
          metadata-store-outage --against pulsar --compare-id compare-five
      magnetar chaos compare chaos/experiments/broker-kill.yaml --against pulsar
    """
    from magnetar.chaos import compare as chaos_compare

    try:
        planned = chaos_compare.plan(experiments, EXPERIMENTS)
        comparison = chaos_compare.new_comparison(against, compare_id)
    except chaos_compare.CompareError as exc:
        raise click.ClickException(str(exc)) from exc
    _show_progress()
    console.print(f"[bold]compare[/] {comparison.directory}")
    chaos_compare.run(planned, comparison, lambda message: console.print(f"[dim]{message}[/]"))
    console.print(chaos_compare.table(comparison))
    console.print(f"table: {comparison.directory / 'compare.json'}")
    if any(row.status in ("failed", "not analysed") for row in comparison.rows):
        raise SystemExit(1)


_DEFAULTS = f"{', '.join(DEMO_EXPERIMENTS)}; with --kube: {', '.join(KUBE_DEMO_EXPERIMENTS)}"


@chaos.command()
@click.option("--cluster-file", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("examples/two-regions.yaml"), show_default=True)  # fmt: skip
@click.option("--experiment", "experiments", multiple=True, default=None,
              help=f"Experiments under chaos/experiments/; repeatable [default: {_DEFAULTS}].")  # fmt: skip
@click.option("--kube", is_flag=True,
              help="Run on the pods of MagnetarClusters already there (magnetar kube up, the chart, "
                   "a cluster applied) instead of starting a local cluster.")  # fmt: skip
@_kube_cluster_options
def demo(
    cluster_file: Path,
    experiments: tuple[str, ...],
    kube: bool,
    kube_clusters: tuple[str, ...],
    kubeconfig: Path | None,
) -> None:
    """Start a local cluster, run experiments with a real workload, write the post-mortem, stop.

    By default two regions (examples/two-regions.yaml): a bundle unloaded and one transferred
    in jp-east, then a consumer failing over to jp-west on a replicated subscription and a
    whole region frozen while both produce; each run's post-mortem counts windows, duplicates
    (same-region and cross-region) and losses.

    With --kube the experiments act on the pods of MagnetarClusters that are already Ready: with
    two regions, jp-east and jp-west sharing a configuration store (examples/k8s/local/geo.yaml),
    the same experiments as locally; with one, jp-east, an unload, a transfer, a broker killed
    and a bookie lost.

    \b
    Examples:
      magnetar chaos demo
      magnetar chaos demo --experiment bundle-unload --experiment region-outage
      magnetar chaos demo --cluster-file examples/one-region.yaml --experiment bookie-loss
      sudo magnetar chaos demo --kube --kube-cluster jp-east@default
      sudo magnetar chaos demo --kube --kube-cluster jp-east@jp-east --kube-cluster jp-west@jp-west
    """
    from datetime import UTC, datetime

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    if kube:
        from magnetar.chaos.pods import target as pod_target

        directory = _kube_target(Path("runs") / f"demo-{stamp}" / "kube-target", kubeconfig, kube_clusters)
        regions = len(pod_target.KubeTarget.load(directory).clusters)
        names = experiments or (DEMO_EXPERIMENTS if regions > 1 else KUBE_DEMO_EXPERIMENTS)
        results = _run_all(names, stamp, chaos_run.Target("kubernetes", directory))
    else:
        results = _demo_locally(cluster_file, experiments or DEMO_EXPERIMENTS, stamp)
    status = _postmortem(*(run_dir for _, run_dir, _ in results))
    analysed = [_losses(run_dir) for _, run_dir, _ in results]
    console.print("[bold]demo results[/]")
    for (name, run_dir, result), losses in zip(results, analysed, strict=True):
        console.print(
            f"  {name}: {result['status']}, hypothesis after: {result['hypothesis_after']}\n"
            f"    {_verdict(losses, status)}\n"
            f"    report: {run_dir / 'report' / 'report.html'}"
        )
    # the post-mortem's status is 3 where any run lost an acknowledged message
    if any(r["status"] != "completed" for _, _, r in results) or status != 0:
        raise SystemExit(1)


Results = list[tuple[str, Path, dict[str, Any]]]


def _demo_locally(cluster_file: Path, experiments: tuple[str, ...], stamp: str) -> Results:
    """Start the local cluster of ``cluster_file``, run ``experiments`` on it, stop it."""
    from magnetar.local.cli import _link_latest
    from magnetar.local.spec import ClusterSpec, ClusterSpecError
    from magnetar.local.supervisor import LocalClusterError, Supervisor

    try:
        spec = ClusterSpec.load(cluster_file)
    except ClusterSpecError as exc:
        raise click.ClickException(str(exc)) from exc
    cluster_dir = Path("runs") / f"demo-{stamp}" / "cluster"
    supervisor = Supervisor(cluster_dir, on_status=lambda msg: console.print(f"[dim]{msg}[/]"))
    console.print(f"[bold]starting[/] {cluster_file} in {cluster_dir}")
    try:
        supervisor.up(spec)
    except (LocalClusterError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    _link_latest(cluster_dir)
    try:
        return _run_all(experiments, stamp, chaos_run.Target("local", cluster_dir))
    finally:
        console.print("[bold]stopping[/] the local cluster")
        supervisor.down()


def _run_all(experiments: tuple[str, ...], stamp: str, target: chaos_run.Target) -> Results:
    results: Results = []
    for name in experiments:
        path = EXPERIMENTS / f"{name}.yaml"
        loaded = chaos_run.load(path)
        run_dir = chaos_run.new_run_dir(path, f"demo-{stamp}-{name}")
        _show_progress()
        journal = chaos_run.execute(loaded, run_dir, target)
        result = chaos_run.summary(journal)
        _print_summary(result, run_dir)
        results.append((name, run_dir, result))
    return results


def _postmortem(*run_dirs: Path) -> int:
    """Run ``magnetar postmortem`` on those of ``run_dirs`` that logged events, in one Spark
    session (it prints the headlines and the reports' paths); its exit status: 0 fine, 3 an
    acknowledged message was lost, 2 bad input."""
    import importlib.util
    import subprocess
    import sys

    logged = [run_dir for run_dir in run_dirs if _logged(run_dir)]
    for run_dir in sorted(set(run_dirs) - set(logged)):
        console.print(f"post-mortem of {run_dir} skipped: the experiment ran no workload (no events/*.jsonl)")
    if not logged:
        return 0
    named = " ".join(str(run_dir) for run_dir in logged)
    if importlib.util.find_spec("pyspark") is None:
        console.print(f"post-mortem skipped: install magnetar[spark], then `magnetar postmortem {named}`")
        return 0
    console.print(f"[bold]post-mortem[/] of {named}")
    command = [sys.executable, "-m", "magnetar", "postmortem", *map(str, logged)]
    return subprocess.run(command, check=False).returncode


def _logged(run_dir: Path) -> bool:
    """Whether the run's workload logged events (an experiment may run none)."""
    return any((run_dir / Layout.EVENTS).glob(f"*{Layout.EVENT_LOG_SUFFIX}"))


def _verdict(losses: int | None, status: int) -> str:
    """What the demo says of one run: ``losses`` from its report, ``status`` the post-mortem's."""
    if losses is None:
        return "not analysed" if status == 0 else f"post-mortem failed (exit {status})"
    return "ACKNOWLEDGED MESSAGES LOST" if losses else "no acknowledged message lost"


def _losses(run_dir: Path) -> int | None:
    """The acknowledged messages the post-mortem of ``run_dir`` found lost: 0 where the run logged
    no events, None where it has no report."""
    import json

    if not _logged(run_dir):
        return 0
    try:
        summary = json.loads((run_dir / Layout.REPORT / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return int(summary["headline"]["losses"])
