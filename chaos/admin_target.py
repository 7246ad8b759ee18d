"""Where an activity sends admin requests: the experiment's ``magnetar_admin_url``, else the
first running broker of the local cluster. Pulsar-compatible paths only, so the same actions
work against Apache Pulsar."""

from __future__ import annotations

from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.chaos.local.supervisor import alive
from magnetar.chaos.process import targets
from magnetar.common.admin_client import AdminClient, AdminError


def admin_url(explicit: str | None, cluster_dir: str | None, configuration: dict[str, Any] | None) -> str:
    url = explicit or (configuration or {}).get("magnetar_admin_url")
    if url:
        return str(url).rstrip("/")
    state = targets.load(targets.cluster_dir(cluster_dir, configuration))
    for broker in state.find("broker"):
        if alive(broker.pid) and broker.endpoints.get("web_service_url"):
            return broker.endpoints["web_service_url"]
    raise ActivityFailed(f"no running broker with an admin URL in {state.directory}")


def service_url(explicit: str | None, cluster_dir: str | None, configuration: dict[str, Any] | None) -> str:
    url = explicit or (configuration or {}).get("magnetar_service_url")
    if url:
        return str(url)
    state = targets.load(targets.cluster_dir(cluster_dir, configuration))
    for broker in state.find("broker"):
        if alive(broker.pid) and broker.endpoints.get("service_url"):
            return broker.endpoints["service_url"]
    raise ActivityFailed(f"no running broker with a service URL in {state.directory}")


def call(base: str, method: str, path: str, body: Any = None) -> Any:
    """``method path`` on the admin API at ``base``; ActivityFailed saying why when it fails."""
    try:
        return AdminClient(base).call(method, path, body)
    except AdminError as exc:
        raise ActivityFailed(str(exc)) from None
