"""`magnetar kube up | down | status`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from magnetar.kube.layout import DEFAULT_PORT_BASE, DEFAULT_STATE_DIR, NODE_IP, NODE_NAME, Layout

state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_STATE_DIR,
    show_default=True,
    help="Where the node keeps its processes' record, data, configuration and logs.",
)


def _say(line: str) -> None:
    # Flushed at once: a pipe (CI, a test, `| tee`) shows each step as it happens, not at the end.
    click.echo(f"[kube] {line}")
    sys.stdout.flush()


def _describe(exc: Exception) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        return f"`{' '.join(map(str, exc.cmd))}` failed: {(exc.stderr or '').strip()}"
    return str(exc) or type(exc).__name__


@click.group(
    epilog="""\b
Examples:
  sudo magnetar kube up
  export KUBECONFIG=~/.cache/magnetar/kube/state/kubeconfig
  magnetar kube status
  sudo magnetar kube down"""
)
def kube() -> None:
    """A real single-node Kubernetes on this machine: etcd, kube-apiserver, kube-controller-manager,
    kube-scheduler, kubelet with its own containerd, kube-proxy (iptables) and CoreDNS, as processes.

    Pods live on the bridge magnetar0 (10.244.0.0/24), Services in 10.96.0.0/24; both are routed
    only on this machine. The binaries come from `make kube-node`, the Debian packages from
    `make kube-deps`."""


@kube.command(
    epilog="""\b
Examples:
  sudo magnetar kube up
  sudo magnetar kube up --state-dir /tmp/kube --port-base 17440"""
)
@state_dir_option
@click.option("--port-base", type=int, default=DEFAULT_PORT_BASE, show_default=True,
              help="First of the 10 consecutive ports on 127.0.0.1 the components listen on.")  # fmt: skip
@click.option("--timeout", "timeout_s", type=float, default=240.0, show_default=True,
              help="Seconds to wait for the node to be Ready and CoreDNS to answer.")  # fmt: skip
@click.option("--volumes", "volume_count", type=click.IntRange(min=0), default=24, show_default=True,
              help="Local PersistentVolumes (10Gi each, directories under the state directory) of the "
                   "default StorageClass 'standard', for PersistentVolumeClaims to bind.")  # fmt: skip
def up(state_dir: Path, port_base: int, timeout_s: float, volume_count: int) -> None:
    """Start the node and wait until it is Ready and CoreDNS answers; print the kubeconfig to use.

    A node already up, or half-started by an earlier run, is never started over: run
    `magnetar kube down` first."""
    from magnetar.kube import node
    from magnetar.kube.host import HostError
    from magnetar.kube.state import State

    layout = Layout(state_dir.expanduser().absolute(), port_base)
    try:
        node.up(layout, _say, timeout_s=timeout_s, volume_count=volume_count)
    except (node.PreflightError, HostError) as exc:  # refused before anything was made
        click.echo(f"magnetar kube up: {exc}", err=True)
        sys.exit(1)
    except Exception as exc:  # after the first change: the state file names what to remove
        click.echo(f"magnetar kube up: {_describe(exc)}", err=True)
        if State.load(layout.state_file) is not None:
            click.echo(f"remove what was started with: magnetar kube down --state-dir {layout.state_dir}",
                       err=True)  # fmt: skip
        sys.exit(1)
    click.echo(f"export KUBECONFIG={layout.kubeconfig}")


@kube.command(
    epilog="""\b
Examples:
  sudo magnetar kube down
  sudo magnetar kube down --state-dir /tmp/kube"""
)
@state_dir_option
def down(state_dir: Path) -> None:
    """Stop every process the node's state records and remove its pods, bridge, routes, iptables
    chains and data (the logs stay). Works on a half-started node too; run it again if it fails."""
    from magnetar.kube import node
    from magnetar.kube.host import HostError

    layout = Layout(state_dir.expanduser().absolute())
    try:
        failures = node.down(layout, _say)
    except HostError as exc:
        click.echo(f"magnetar kube down: {exc}", err=True)
        sys.exit(1)
    if failures:
        click.echo(
            "magnetar kube down: not everything was removed:\n  - " + "\n  - ".join(failures), err=True
        )
        sys.exit(1)


@kube.command(
    epilog="""\b
Examples:
  magnetar kube status
  magnetar kube status --state-dir /tmp/kube"""
)
@state_dir_option
def status(state_dir: Path) -> None:
    """Each component with its PID and whether it runs, whether the node is Ready and whether CoreDNS
    answers. Exits 1 unless all are."""
    from magnetar.kube import node

    layout = Layout(state_dir.expanduser().absolute())
    current = node.status(layout)
    if current is None:
        click.echo(f"no node in {layout.state_dir}")
        sys.exit(1)
    click.echo(f"state: {current.phase} ({layout.state_dir})")
    for name, pid, alive in current.procs:
        click.echo(f"  {name:<24} pid {pid:<8} {'running' if alive else 'NOT RUNNING'}")
    click.echo(f"  node {NODE_NAME:<19} {'Ready' if current.node_ready else 'NOT READY'}")
    click.echo(f"  CoreDNS on {NODE_IP}:53     {'answers' if current.dns else 'NOT ANSWERING'}")
    healthy = (
        current.phase == "up" and all(a for _, _, a in current.procs) and current.node_ready and current.dns
    )
    sys.exit(0 if healthy else 1)
