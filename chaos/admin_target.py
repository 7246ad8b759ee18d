"""Where an activity sends admin requests, and as whom: the experiment's ``magnetar_admin_url``,
else the first running broker of the local cluster. Pulsar-compatible paths only, so the same
actions work against Apache Pulsar.

Credentials: the experiment's ``magnetar_auth_plugin`` / ``magnetar_auth_params`` (Pulsar's
``--auth-plugin`` / ``--auth-params``, for any cluster), else, for a broker of the local cluster,
the super-user's token when that cluster is secured (``security`` in its state); else none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.admin.client import AdminClient, AdminError
from magnetar.chaos.process import targets
from magnetar.common.authentication.client import ClientCredentials
from magnetar.local import secured_cluster
from magnetar.local.supervisor import alive

AUTH_PLUGIN_KEY = "magnetar_auth_plugin"
AUTH_PARAMS_KEY = "magnetar_auth_params"
CLUSTER_NAME_KEY = "magnetar_cluster_name"


@dataclass(frozen=True)
class AdminTarget:
    url: str
    credentials: ClientCredentials = field(default_factory=ClientCredentials)


def admin_target(
    explicit: str | None, cluster_dir: str | None, configuration: dict[str, Any] | None
) -> AdminTarget:
    url = explicit or (configuration or {}).get("magnetar_admin_url")
    if url:
        return AdminTarget(
            str(url).rstrip("/"), _credentials(auth_settings(None, configuration, local=False))
        )
    state = targets.load(targets.cluster_dir(cluster_dir, configuration))
    for broker in state.find("broker"):
        if alive(broker.pid) and broker.endpoints.get("web_service_url"):
            auth = auth_settings(cluster_dir, configuration, local=True)
            return AdminTarget(broker.endpoints["web_service_url"], _credentials(auth))
    raise ActivityFailed(f"no running broker with an admin URL in {state.directory}")


def admin_url(explicit: str | None, cluster_dir: str | None, configuration: dict[str, Any] | None) -> str:
    return admin_target(explicit, cluster_dir, configuration).url


def auth_settings(
    cluster_dir: str | None, configuration: dict[str, Any] | None, *, local: bool
) -> dict[str, str]:
    """``auth_plugin`` / ``auth_params`` a client of the target sends (empty: none); ``local``:
    the client talks to the local cluster's brokers, so its super-user's token fits."""
    config = configuration or {}
    if config.get(AUTH_PLUGIN_KEY):
        return {
            "auth_plugin": str(config[AUTH_PLUGIN_KEY]),
            "auth_params": str(config.get(AUTH_PARAMS_KEY, "")),
        }
    if not local:
        return {}
    recorded = targets.load(targets.cluster_dir(cluster_dir, configuration)).security
    return {k: v for k, v in recorded.items() if k in ("auth_plugin", "auth_params")}


def _credentials(auth: dict[str, str]) -> ClientCredentials:
    try:
        return secured_cluster.credentials(auth)
    except ValueError as exc:
        raise ActivityFailed(f"unusable admin credentials: {exc}") from None


def cluster_name(cluster_dir: str | None, configuration: dict[str, Any] | None) -> str | None:
    """The cluster (region) the activities act in: the experiment's ``magnetar_cluster_name``,
    else, unless an admin or service URL names another cluster, the local cluster's first
    region; None when neither says."""
    config = configuration or {}
    if config.get(CLUSTER_NAME_KEY):
        return str(config[CLUSTER_NAME_KEY])
    if config.get("magnetar_admin_url") or config.get("magnetar_service_url"):
        return None
    try:
        regions = targets.load(targets.cluster_dir(cluster_dir, configuration)).regions
    except ActivityFailed:
        return None
    return next(iter(regions), None)


def service_url(explicit: str | None, cluster_dir: str | None, configuration: dict[str, Any] | None) -> str:
    url = explicit or (configuration or {}).get("magnetar_service_url")
    if url:
        return str(url)
    state = targets.load(targets.cluster_dir(cluster_dir, configuration))
    for broker in state.find("broker"):
        if alive(broker.pid) and broker.endpoints.get("service_url"):
            return broker.endpoints["service_url"]
    raise ActivityFailed(f"no running broker with a service URL in {state.directory}")


def call(target: AdminTarget | str, method: str, path: str, body: Any = None) -> Any:
    """``method path`` on the admin API at ``target`` (a bare URL: without credentials);
    ActivityFailed saying why when it fails."""
    if isinstance(target, str):
        target = AdminTarget(target)
    try:
        return AdminClient(target.url, credentials=target.credentials).call(method, path, body)
    except AdminError as exc:
        raise ActivityFailed(str(exc)) from None
