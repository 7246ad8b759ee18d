"""``magnetar admin``: the admin REST API in ``pulsar-admin``'s command shapes."""

from __future__ import annotations

from typing import Any

import click

from magnetar.admin import cli_permissions, cli_policies
from magnetar.admin.cli_common import AdminClient
from magnetar.admin.cli_common import show as _show
from magnetar.admin.cli_schemas import schemas
from magnetar.admin.cli_topics import topics
from magnetar.common.authentication.client import ClientCredentials
from magnetar.common.tls import TlsSettingsError, client_context


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar admin tenants create acme --allowed-clusters jp-east,jp-west
  magnetar admin --auth-plugin token --auth-params file:///path/to/admin.token tenants list
  magnetar admin --admin-url https://127.0.0.1:8443 --tls-trust-certs-file-path ca.cert.pem \
      --auth-plugin tls --auth-params tlsCertFile:admin.cert.pem,tlsKeyFile:admin.key.pem tenants list
  magnetar admin --auth-plugin basic --auth-params '{"userId":"ops","password":"..."}' tenants list
  magnetar admin namespaces create --clusters jp-east,jp-west acme/orders
  magnetar admin namespaces grant-permission acme/orders --role app --actions produce,consume
  magnetar admin namespaces bundles public/default
  magnetar admin namespaces unload public/default --bundle 0x00000000_0x40000000
  magnetar admin namespaces unload public/default -b 0x00000000_0x40000000 -d 127.0.0.1:6651
  magnetar admin topics stats persistent://public/default/orders
  magnetar admin topics create-partitioned-topic persistent://public/default/orders -p 8
  magnetar admin namespaces delete acme/orders --force
  magnetar admin namespaces set-retention acme/orders --size 1G --time 3d
  magnetar admin topics set-backlog-quota persistent://acme/orders/placed -l 2G -p producer_request_hold
  magnetar admin namespaces set-schema-compatibility-strategy acme/orders -c FULL
  magnetar admin schemas get persistent://acme/orders/placed
  magnetar admin brokers leader-broker""",
)
@click.option("--admin-url", envvar="MAGNETAR_ADMIN_URL", default="http://127.0.0.1:8080", show_default=True,
              help="Admin REST URL of any broker (env MAGNETAR_ADMIN_URL).")  # fmt: skip
@click.option(
    "--auth-plugin",
    envvar="MAGNETAR_AUTH_PLUGIN",
    default="",
    help="Authentication plugin: token, basic or tls (or Pulsar's …client.impl.auth.* class names).",
)
@click.option("--auth-params", envvar="MAGNETAR_AUTH_PARAMS", default="",
              help="Its parameters: token:<jwt> or file:///path/to/token; "
              '{"userId":"…","password":"…"}; tlsCertFile:…,tlsKeyFile:….')  # fmt: skip
@click.option(
    "--tls-trust-certs-file-path",
    "--tls-trust-cert-path",
    "trust_certs",
    envvar="MAGNETAR_TLS_TRUST_CERTS",
    default="",
    help="The CAs an https:// admin URL's certificate is checked against (default: the system's).",
)
@click.option(
    "--tls-allow-insecure", is_flag=True, help="Do not check the server's certificate (testing only)."
)
@click.pass_context
def admin(
    ctx: click.Context,
    admin_url: str,
    auth_plugin: str,
    auth_params: str,
    trust_certs: str,
    tls_allow_insecure: bool,
) -> None:
    """Administer clusters, tenants, namespaces, bundles, topics and brokers (pulsar-admin shapes)."""
    try:
        credentials = ClientCredentials.from_plugin(auth_plugin, auth_params)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--auth-plugin/--auth-params") from None
    try:
        tls = client_context(
            trust_certs,
            certificate=credentials.tls_certificate,
            key=credentials.tls_key,
            allow_insecure=tls_allow_insecure,
        )
    except TlsSettingsError as exc:
        raise click.BadParameter(str(exc), param_hint="--tls-trust-certs-file-path/--auth-params") from None
    ctx.obj = AdminClient(admin_url, credentials=credentials, tls=tls)


admin.add_command(topics)
admin.add_command(schemas)


@admin.group()
def clusters() -> None:
    """Clusters (regions)."""


@clusters.command("list")
@click.pass_obj
def clusters_list(client: AdminClient) -> None:
    _show(client.call("GET", "/admin/v2/clusters"))


@clusters.command("get")
@click.argument("cluster")
@click.pass_obj
def clusters_get(client: AdminClient, cluster: str) -> None:
    _show(client.call("GET", f"/admin/v2/clusters/{cluster}"))


@clusters.command("create")
@click.argument("cluster")
@click.option("--broker-url", required=True, help="Pulsar service URL of the cluster (pulsar://host:port).")
@click.option("--url", default="", help="Admin (web service) URL of the cluster.")
@click.pass_obj
def clusters_create(client: AdminClient, cluster: str, broker_url: str, url: str) -> None:
    client.call("PUT", f"/admin/v2/clusters/{cluster}", {"serviceUrl": url, "brokerServiceUrl": broker_url})


@admin.group()
def tenants() -> None:
    """Tenants."""


@tenants.command("list")
@click.pass_obj
def tenants_list(client: AdminClient) -> None:
    _show(client.call("GET", "/admin/v2/tenants"))


@tenants.command("create")
@click.argument("tenant")
@click.option("--allowed-clusters", "-c", default="", help="Comma-separated clusters.")
@click.option("--admin-roles", "-r", default="", help="Comma-separated roles administering the tenant.")
@click.pass_obj
def tenants_create(client: AdminClient, tenant: str, allowed_clusters: str, admin_roles: str) -> None:
    clusters = [c for c in allowed_clusters.split(",") if c]
    body: dict[str, list[str]] = {"allowedClusters": clusters} if clusters else {}
    if admin_roles:
        body["adminRoles"] = [r for r in admin_roles.split(",") if r]
    client.call("PUT", f"/admin/v2/tenants/{tenant}", body)


@tenants.command("update")
@click.argument("tenant")
@click.option("--allowed-clusters", "-c", default="", help="Comma-separated clusters (default: kept).")
@click.option(
    "--admin-roles", "-r", default="", help="Comma-separated roles administering the tenant (default: kept)."
)
@click.pass_obj
def tenants_update(client: AdminClient, tenant: str, allowed_clusters: str, admin_roles: str) -> None:
    """Change what is given; what is not is kept, as pulsar-admin's tenants update does."""
    current = client.call("GET", f"/admin/v2/tenants/{tenant}")
    clusters = [c for c in allowed_clusters.split(",") if c] or current.get("allowedClusters", [])
    roles = [r for r in admin_roles.split(",") if r] or current.get("adminRoles", [])
    client.call("POST", f"/admin/v2/tenants/{tenant}", {"allowedClusters": clusters, "adminRoles": roles})


@tenants.command("delete")
@click.argument("tenant")
@click.pass_obj
def tenants_delete(client: AdminClient, tenant: str) -> None:
    """A tenant without namespaces."""
    client.call("DELETE", f"/admin/v2/tenants/{tenant}")


@admin.group()
def namespaces() -> None:
    """Namespaces and their bundles."""


@namespaces.command("list")
@click.argument("tenant")
@click.pass_obj
def namespaces_list(client: AdminClient, tenant: str) -> None:
    _show(client.call("GET", f"/admin/v2/namespaces/{tenant}"))


@namespaces.command("create")
@click.argument("namespace")
@click.option("--clusters", "-c", default="", help="Comma-separated replication clusters.")
@click.option("--bundles", "-b", type=int, default=None, help="Number of bundles (default 4).")
@click.pass_obj
def namespaces_create(client: AdminClient, namespace: str, clusters: str, bundles: int | None) -> None:
    body: dict[str, Any] = {}
    if clusters:
        body["replication_clusters"] = [c for c in clusters.split(",") if c]
    if bundles is not None:
        body["bundles"] = {"numBundles": bundles}
    client.call("PUT", f"/admin/v2/namespaces/{namespace}", body)


@namespaces.command("delete")
@click.argument("namespace")
@click.option("--force", "-f", is_flag=True, help="Delete its topics and their data with it.")
@click.pass_obj
def namespaces_delete(client: AdminClient, namespace: str, force: bool) -> None:
    client.call("DELETE", f"/admin/v2/namespaces/{namespace}?force={str(force).lower()}")


@namespaces.command("set-auto-topic-creation")
@click.argument("namespace")
@click.option(
    "--enable/--disable", "-e/-d", default=True, show_default=True, help="Whether clients create topics."
)
@click.option("--type", "-t", "topic_type", type=click.Choice(["non-partitioned", "partitioned"]),
              default="non-partitioned", show_default=True)  # fmt: skip
@click.option("--num-partitions", "-n", type=int, default=None, help="Partitions of a new partitioned topic.")
@click.pass_obj
def namespaces_set_auto_topic_creation(
    client: AdminClient, namespace: str, enable: bool, topic_type: str, num_partitions: int | None
) -> None:
    """The namespace's own auto topic creation rule."""
    body: dict[str, Any] = {"allowAutoTopicCreation": enable, "topicType": topic_type}
    if num_partitions is not None:
        body["defaultNumPartitions"] = num_partitions
    client.call("POST", f"/admin/v2/namespaces/{namespace}/autoTopicCreation", body)


@namespaces.command("get-auto-topic-creation")
@click.argument("namespace")
@click.pass_obj
def namespaces_get_auto_topic_creation(client: AdminClient, namespace: str) -> None:
    _show(client.call("GET", f"/admin/v2/namespaces/{namespace}/autoTopicCreation"))


@namespaces.command("remove-auto-topic-creation")
@click.argument("namespace")
@click.pass_obj
def namespaces_remove_auto_topic_creation(client: AdminClient, namespace: str) -> None:
    """Back to the broker's rule."""
    client.call("DELETE", f"/admin/v2/namespaces/{namespace}/autoTopicCreation")


@namespaces.command("policies")
@click.argument("namespace")
@click.pass_obj
def namespaces_policies(client: AdminClient, namespace: str) -> None:
    _show(client.call("GET", f"/admin/v2/namespaces/{namespace}"))


@namespaces.command("set-clusters")
@click.argument("namespace")
@click.option("--clusters", "-c", required=True, help="Comma-separated replication clusters.")
@click.pass_obj
def namespaces_set_clusters(client: AdminClient, namespace: str, clusters: str) -> None:
    client.call(
        "POST", f"/admin/v2/namespaces/{namespace}/replication", [c for c in clusters.split(",") if c]
    )


@namespaces.command("set-replicated-subscriptions-snapshot-frequency")
@click.argument("namespace")
@click.option("--millis", "-m", type=int, required=True, help="Milliseconds between snapshots (>= 50).")
@click.pass_obj
def namespaces_set_snapshot_frequency(client: AdminClient, namespace: str, millis: int) -> None:
    """PIP-33: how often the namespace's topics take replicated-subscription snapshots."""
    client.call("POST", f"/admin/v2/namespaces/{namespace}/replicatedSubscriptionsSnapshotFrequency", millis)


@namespaces.command("get-clusters")
@click.argument("namespace")
@click.pass_obj
def namespaces_get_clusters(client: AdminClient, namespace: str) -> None:
    _show(client.call("GET", f"/admin/v2/namespaces/{namespace}/replication"))


@namespaces.command("bundles")
@click.argument("namespace")
@click.pass_obj
def namespaces_bundles(client: AdminClient, namespace: str) -> None:
    _show(client.call("GET", f"/admin/v2/namespaces/{namespace}/bundles"))


@namespaces.command("unload")
@click.argument("namespace")
@click.option("--bundle", "-b", default=None, help="One bundle (0x00000000_0x40000000); default: all.")
@click.option("--destinationBroker", "--destination-broker", "-d", "destination", default=None,
              help="Transfer the bundle to this broker instead of unloading it.")  # fmt: skip
@click.pass_obj
def namespaces_unload(
    client: AdminClient, namespace: str, bundle: str | None, destination: str | None
) -> None:
    if bundle is None:
        if destination:
            raise click.UsageError("--destinationBroker needs --bundle")
        client.call("PUT", f"/admin/v2/namespaces/{namespace}/unload")
        return
    query = f"?destinationBroker={destination}" if destination else ""
    _show(client.call("PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/unload{query}"))


@namespaces.command("split-bundle")
@click.argument("namespace")
@click.option("--bundle", "-b", required=True, help="The bundle to split in two.")
@click.pass_obj
def namespaces_split(client: AdminClient, namespace: str, bundle: str) -> None:
    _show(client.call("PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/split"))


@admin.group()
def brokers() -> None:
    """Brokers."""


@brokers.command("list")
@click.argument("cluster")
@click.pass_obj
def brokers_list(client: AdminClient, cluster: str) -> None:
    _show(client.call("GET", f"/admin/v2/brokers/{cluster}"))


@brokers.command("leader-broker")
@click.pass_obj
def brokers_leader(client: AdminClient) -> None:
    _show(client.call("GET", "/admin/v2/brokers/leaderBroker"))


cli_policies.install(namespaces, topics)
cli_permissions.install(namespaces, topics)
