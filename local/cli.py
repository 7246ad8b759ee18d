"""``magnetar local up | down | status``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from magnetar.local.spec import ClusterSpec, ClusterSpecError
from magnetar.local.supervisor import ClusterState, LocalClusterError, Supervisor

console = Console()

_dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Cluster directory (default: runs/<cluster name>-<time>/cluster for up, runs/latest-cluster after).",
)
LATEST = Path("runs/latest-cluster")


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar local up -f examples/one-region.yaml
  magnetar local up -f examples/two-regions.yaml --dir runs/demo/cluster
  magnetar local status
  magnetar local down --dir runs/demo/cluster""",
)
def local() -> None:
    """Run a Magnetar cluster of real processes on this machine (ZooKeeper, bookies, brokers)."""


@local.command()
@click.option("-f", "--file", "file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Cluster file (see examples/one-region.yaml).")  # fmt: skip
@_dir_option
@click.option(
    "--timeout", "timeout_s", type=float, default=60, show_default=True, help="Seconds per process."
)
def up(file: Path, directory: Path | None, timeout_s: float) -> None:
    """Start every process of the cluster file and wait until each is ready."""
    try:
        spec = ClusterSpec.load(file)
    except ClusterSpecError as exc:
        raise click.ClickException(str(exc)) from exc
    if directory is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        directory = Path("runs") / f"{spec.name}-{stamp}" / "cluster"
    supervisor = Supervisor(directory, on_status=lambda msg: console.print(f"[dim]{msg}[/]"))
    try:
        state = supervisor.up(spec, timeout_s=timeout_s)
    except (LocalClusterError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    _link_latest(directory)
    _print_state(state, supervisor)


@local.command()
@_dir_option
def down(directory: Path | None) -> None:
    """Stop exactly the processes `up` started (brokers, bookies, then ZooKeeper)."""
    supervisor = Supervisor(_resolve(directory), on_status=lambda msg: console.print(f"[dim]{msg}[/]"))
    try:
        stopped = supervisor.down()
    except LocalClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"stopped {len(stopped)} processes")


@local.command()
@_dir_option
def status(directory: Path | None) -> None:
    """Show every process of the cluster, whether it runs, and where it listens."""
    supervisor = Supervisor(_resolve(directory))
    try:
        state = ClusterState.load(supervisor.directory)
    except LocalClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    _print_state(state, supervisor)


def _print_state(state: ClusterState, supervisor: Supervisor) -> None:
    table = Table("name", "role", "region", "pid", "state", "address / service URL", title=state.name)
    for record, running in supervisor.status():
        where = record.endpoints.get("service_url", record.address)
        table.add_row(
            record.name, record.role, record.region, str(record.pid),
            "[green]running[/]" if running else "[red]stopped[/]", where,
        )  # fmt: skip
    console.print(table)
    console.print(f"cluster directory: {state.directory}")


def _resolve(directory: Path | None) -> Path:
    if directory is not None:
        return directory
    if LATEST.is_symlink() or LATEST.exists():
        return LATEST.resolve()
    raise click.ClickException("no cluster directory given and no runs/latest-cluster: pass --dir")


def _link_latest(directory: Path) -> None:
    LATEST.parent.mkdir(parents=True, exist_ok=True)
    if LATEST.is_symlink() or LATEST.exists():
        LATEST.unlink()
    LATEST.symlink_to(directory.resolve())


@local.command("link-proxy")
@click.option("--listen", required=True, help="host:port to accept on (port 0: any free port).")
@click.option("--target", "targets", multiple=True, required=True, help="host:port to forward to; repeat.")
def link_proxy(listen: str, targets: tuple[str, ...]) -> None:
    """A proxy on a link between regions, which the chaos lab cuts to partition them
    (`magnetar local up` starts these itself for clusters of two or more regions).

    SIGUSR1 cuts the link (connections stay open but carry nothing), SIGUSR2 heals it.

    \b
    Examples:
      magnetar local link-proxy --listen 127.0.0.1:7650 --target 127.0.0.1:6650
      magnetar local link-proxy --listen 127.0.0.1:7600 --target 127.0.0.1:6650 --target 127.0.0.1:6651
    """
    from magnetar.local import link_proxy as proxy

    try:
        listen_address = proxy.parse_address(listen)
        target_addresses = [proxy.parse_address(t) for t in targets]
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    proxy.run(listen_address, target_addresses)
