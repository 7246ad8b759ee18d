"""``magnetar operator run | render | crds``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from pathlib import Path

import click
import yaml

CRDS = Path(__file__).resolve().parent.parent / "charts" / "magnetar" / "crds"


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar operator run --all-namespaces
  magnetar operator run --namespace magnetar --peering magnetar
  magnetar operator render -f examples/k8s/cluster.yaml
  magnetar operator crds | kubectl apply -f -""",
)
def operator() -> None:
    """The Kubernetes operator for MagnetarCluster, MagnetarNamespace and MagnetarBundle."""


@operator.command()
@click.option("-n", "--namespace", "namespaces", multiple=True, help="Watch this namespace (repeatable).")
@click.option("-A", "--all-namespaces", is_flag=True, help="Watch every namespace.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="Kubeconfig file (default: in-cluster credentials, then ~/.kube/config).")  # fmt: skip
@click.option("--peering", default=None,
              help="Peering object for high availability: one replica acts at a time.")  # fmt: skip
@click.option("--liveness", default=None, help="Serve a liveness probe, e.g. http://0.0.0.0:8080/healthz.")
@click.option("--metrics-port", type=click.IntRange(1, 65535), default=None,
              help="Serve the operator's Prometheus /metrics on this port (all addresses).")  # fmt: skip
@click.option("--pod-monitors/--no-pod-monitors", default=True, show_default=True,
              help="Make a PodMonitor per component where the Prometheus Operator's CRDs exist.")  # fmt: skip
@click.option("--ready-deadline", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Seconds a restarted pod may take to be ready before its roll halts.")  # fmt: skip
@click.option("--autoscale-interval", type=click.FloatRange(min=1), default=15.0, show_default=True,
              help="Seconds between looks at autoscaled brokers' load reports.")  # fmt: skip
@click.option("--verbose", is_flag=True, help="Debug logging.")
def run(
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    kubeconfig: str | None,
    peering: str | None,
    liveness: str | None,
    metrics_port: int | None,
    pod_monitors: bool,
    ready_deadline: float,
    autoscale_interval: float,
    verbose: bool,
) -> None:
    """Reconcile Magnetar resources until interrupted.

    \b
    Examples:
      magnetar operator run -A
      magnetar operator run -n prod -n staging --peering magnetar --liveness http://0.0.0.0:8080/healthz
      magnetar operator run -A --metrics-port 9090 --no-pod-monitors
      magnetar operator run -A --autoscale-interval 5
    """
    if not namespaces and not all_namespaces:
        raise click.UsageError("name the namespaces to watch (--namespace NS) or pass --all-namespaces")
    if namespaces and all_namespaces:
        raise click.UsageError("--namespace and --all-namespaces exclude each other")
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    from magnetar.operator.app import Deps
    from magnetar.operator.app import run as run_operator
    from magnetar.operator.kube_api import api_client

    deps = Deps(
        api=api_client(kubeconfig),
        pod_monitors=pod_monitors,
        ready_deadline_s=ready_deadline,
        autoscale_interval_s=autoscale_interval,
    )
    if metrics_port is not None:
        deps.metrics.serve(metrics_port)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            run_operator(
                deps, namespaces=namespaces, clusterwide=all_namespaces, peering=peering, liveness=liveness
            )
        )


@operator.command()
@click.option(
    "-f",
    "--file",
    "path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A YAML file holding a MagnetarCluster.",
)
@click.option("--namespace", default="default", show_default=True, help="Namespace the objects go to.")
def render(path: Path, namespace: str) -> None:
    """Print the objects a MagnetarCluster becomes, without a Kubernetes API server.

    \b
    Examples:
      magnetar operator render -f examples/k8s/cluster.yaml
      magnetar operator render -f examples/k8s/cluster.yaml --namespace prod | less
    """
    from magnetar.operator.manifests import render_cluster
    from magnetar.operator.resources import SpecError
    from magnetar.operator.validation import parse_cluster

    docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "MagnetarCluster"]
    if not docs:
        raise click.ClickException(f"{path} holds no MagnetarCluster")
    for doc in docs:
        name = doc["metadata"]["name"]
        try:
            spec = parse_cluster(doc.get("spec") or {}, name)
        except SpecError as exc:
            raise click.ClickException(f"{path}: MagnetarCluster {name}: {exc}") from None
        if spec.external is not None:
            click.echo(f"# {name} is external: the operator deploys nothing for it", err=True)
            continue
        sys.stdout.write(yaml.safe_dump_all(render_cluster(spec, name, namespace), sort_keys=False))


@operator.command()
def crds() -> None:
    """Print the CustomResourceDefinitions (the chart's crds/), for kubectl apply.

    \b
    Examples:
      magnetar operator crds | kubectl apply -f -
    """
    paths = sorted(CRDS.glob("*.yaml"))
    if not paths:
        raise click.ClickException(f"no CRDs at {CRDS}: run from a source checkout, or use the Helm chart")
    for path in paths:
        click.echo("---")
        click.echo(path.read_text().rstrip())
