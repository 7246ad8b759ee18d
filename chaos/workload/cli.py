"""``magnetar workload``: producers and consumers on the official client, writing the event log."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from magnetar.chaos.workload.clients import DEFAULT_TICK_S, SUBSCRIPTION_TYPES, Endpoint
from magnetar.chaos.workload.runner import WorkloadSpec, run
from magnetar.common.authentication.client import ClientCredentials


def _endpoint(text: str) -> Endpoint:
    cluster, sep, url = text.partition("=")
    if not sep or not url.startswith("pulsar"):
        raise click.BadParameter(f"expected CLUSTER=pulsar://host:port, got {text!r}")
    return Endpoint(cluster, url)


@click.command(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar workload --service-url pulsar://127.0.0.1:6650 --run-dir runs/try --duration 30
  magnetar workload --service-url pulsar://127.0.0.1:6650 --cluster jp-east \\
      --endpoint jp-west=pulsar://127.0.0.1:6651 --subscription-type Failover \\
      --replicate-subscription-state --rate 500 --keys 64 --run-dir runs/geo
  magnetar workload --service-url pulsar://127.0.0.1:6650 --admin-url http://127.0.0.1:8080 \\
      --topic persistent://public/default/orders --partitions 8 --subscription-type KeyShared \\
      --run-dir runs/parted
  magnetar workload --service-url pulsar://127.0.0.1:6650 --auth-plugin token \\
      --auth-params file://$PWD/data/standalone/security/admin.token --run-dir runs/secured
  magnetar workload --service-url pulsar+ssl://127.0.0.1:6651 \\
      --tls-trust-certs-file-path data/standalone/security/ca.cert.pem --auth-plugin token \\
      --auth-params file://$PWD/data/standalone/security/admin.token --run-dir runs/secured-tls
A consumer moves to another region when its control file runs/<id>/control/<client>.json
says {"cluster": "jp-west"}. SIGTERM stops producing; consumers then drain.""",
)
@click.option("--service-url", required=True, help="Pulsar service URL (Magnetar or Apache Pulsar).")
@click.option("--cluster", default="local", show_default=True, help="Name of that cluster in the events.")
@click.option("--endpoint", "endpoints", multiple=True, help="Other clusters, CLUSTER=URL; repeatable.")
@click.option("--topic", default="persistent://public/default/chaos", show_default=True)
@click.option("--producers", type=int, default=1, show_default=True)
@click.option("--consumers", type=int, default=1, show_default=True)
@click.option("--subscription", default="chaos", show_default=True)
@click.option(
    "--subscription-type", type=click.Choice(sorted(SUBSCRIPTION_TYPES)), default="Shared", show_default=True
)
@click.option("--replicate-subscription-state", is_flag=True, help="PIP-33 replicated subscription.")
@click.option("--rate", type=float, default=100, show_default=True, help="Messages/s per producer.")
@click.option("--size", type=int, default=256, show_default=True, help="Payload bytes.")
@click.option("--keys", type=int, default=16, show_default=True, help="Distinct keys (0: no keys).")
@click.option("--batching/--no-batching", default=False, show_default=True)
@click.option(
    "--tick-ms",
    type=click.FloatRange(min=0),
    default=DEFAULT_TICK_S * 1000,
    show_default=True,
    help="Producers send what is due at most this often (0: each message at its own moment).",
)
@click.option(
    "--partitions",
    type=int,
    default=0,
    show_default=True,
    help="Create the topic with this many partitions first (needs --admin-url; 0: as it is).",
)
@click.option("--admin-url", default=None, help="Admin REST URL, to create a partitioned topic.")
@click.option(
    "--auth-plugin", default="", help="Authentication plugin: token, basic or tls (as pulsar-admin's)."
)
@click.option("--auth-params", default="",
              help='Its parameters: token:<jwt> or file:///path/to/token; {"userId":"…","password":"…"}; '
              "tlsCertFile:…,tlsKeyFile:….")  # fmt: skip
@click.option("--tls-trust-certs-file-path", "trust_certs", default="",
              help="The CAs a pulsar+ssl:// or https:// URL's certificate is checked against.")  # fmt: skip
@click.option("--listener-name", default="",
              help="Brokers' advertised listener to look up (Pulsar's listenerName): pod-ip.")  # fmt: skip
@click.option("--duration", type=float, default=60, show_default=True, help="Seconds of producing.")
@click.option("--drain", "drain_s", type=float, default=30, show_default=True, help="Max seconds to drain.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--prefix", default="w", show_default=True, help="Prefix of client ids (unique per process).")
def workload(
    service_url: str,
    cluster: str,
    endpoints: tuple[str, ...],
    topic: str,
    producers: int,
    consumers: int,
    subscription: str,
    subscription_type: str,
    replicate_subscription_state: bool,
    rate: float,
    size: int,
    keys: int,
    batching: bool,
    tick_ms: float,
    partitions: int,
    admin_url: str | None,
    auth_plugin: str,
    auth_params: str,
    trust_certs: str,
    listener_name: str,
    duration: float,
    drain_s: float,
    run_dir: Path,
    prefix: str,
) -> None:
    """Produce and consume through the official Pulsar client, writing runs/<id>/events/*.jsonl."""
    if partitions and not admin_url:
        raise click.UsageError("--partitions needs --admin-url")
    try:
        credentials = ClientCredentials.from_plugin(auth_plugin, auth_params)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--auth-plugin/--auth-params") from None
    others = {
        e.cluster: replace(e, credentials=credentials, trust_certs=trust_certs, listener_name=listener_name)
        for e in map(_endpoint, endpoints)
    }
    spec = WorkloadSpec(
        run_dir=run_dir,
        run_id=run_dir.name,
        prefix=prefix,
        home=Endpoint(cluster, service_url, credentials, trust_certs, listener_name),
        topic=topic,
        producers=producers,
        consumers=consumers,
        subscription=subscription,
        subscription_type=subscription_type,
        rate=rate,
        size=size,
        keys=keys,
        batching=batching,
        tick_s=tick_ms / 1000,
        duration_s=duration,
        drain_s=drain_s,
        replicate_subscription_state=replicate_subscription_state,
        endpoints=others,
        partitions=partitions,
        admin_url=admin_url,
    )
    counters = run(spec, on_status=click.echo)
    for client, counts in sorted(counters.items()):
        shown = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        click.echo(f"{client}: {shown}")
