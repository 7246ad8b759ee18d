"""Unload and transfer bundles through the admin REST API, as an operator or the load manager
would. The paths are Pulsar's, so these also work against Apache Pulsar (transfer needs
Pulsar >= 3.2 with the extensible load manager)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.admin.client import AdminClient, AdminError
from magnetar.chaos.admin_target import AdminTarget, admin_target, call, cluster_name

__all__ = ["transfer_bundle", "unload_bundle", "unload_namespace"]


def _topic_path(topic: str) -> str:
    prefix = "persistent://"
    if not topic.startswith(prefix):
        raise ActivityFailed(f"expected persistent://tenant/namespace/topic, got {topic!r}")
    return topic[len(prefix) :]


def _bundle(base: AdminTarget, topic: str) -> tuple[str, str]:
    """The topic's namespace and the range of the bundle that holds it."""
    path = _topic_path(topic)
    namespace = "/".join(path.split("/")[:2])
    try:
        return namespace, str(
            AdminClient(base.url, credentials=base.credentials).call(
                "GET", f"/admin/v2/persistent/{path}/bundle"
            )
        )
    except AdminError as exc:
        if exc.status != 404:
            raise ActivityFailed(str(exc)) from None
    # Apache Pulsar has no such admin path: its lookup API answers the bundle, as plain text
    return namespace, _plain_text(base, f"/lookup/v2/topic/persistent/{path}/bundle")


def _plain_text(base: AdminTarget, path: str) -> str:
    request = urllib.request.Request(base.url + path, headers=base.credentials.http_headers())
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return str(response.read().decode()).strip().strip('"')
    except urllib.error.HTTPError as exc:
        raise ActivityFailed(
            f"GET {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')[:300]}"
        ) from None
    except OSError as exc:
        raise ActivityFailed(f"GET {path}: {exc}") from None


def unload_bundle(
    topic: str,
    admin_url_: str | None = None,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Unload the bundle that holds ``topic``: its topics close at once and clients reconnect
    with backoff after a new lookup (Pulsar's unload, a micro-outage)."""
    base = admin_target(admin_url_, cluster_dir, configuration)
    namespace, bundle = _bundle(base, topic)
    started = time.time()
    call(base, "PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/unload")
    return {"namespace": namespace, "bundle": bundle, "at": started, "took_s": time.time() - started}


def transfer_bundle(
    topic: str,
    destination: str | None = None,
    admin_url_: str | None = None,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Move the bundle that holds ``topic`` to ``destination`` (a broker id, host:port; default:
    any other broker of the cluster). Clients are told where to reconnect, so none waits out a
    backoff."""
    base = admin_target(admin_url_, cluster_dir, configuration)
    namespace, bundle = _bundle(base, topic)
    lookup = call(base, "GET", f"/lookup/v2/topic/persistent/{_topic_path(topic)}")
    owner = lookup["brokerUrl"]
    # a broker's id is its service address (Magnetar) or its web address (Pulsar's extensible
    # load manager): the owner is whichever of its URLs ends with the id
    owner_urls = [url for url in (owner, lookup.get("httpUrl")) if url]
    if destination is None:
        cluster = cluster_name(cluster_dir, configuration)
        clusters = [cluster] if cluster else call(base, "GET", "/admin/v2/clusters")
        brokers = [b for c in clusters for b in call(base, "GET", f"/admin/v2/brokers/{c}")]
        others = [b for b in brokers if not any(url.endswith(b) for url in owner_urls)]
        if not others:
            raise ActivityFailed(f"no broker other than the owner {owner} to transfer {bundle} to")
        destination = others[0]
    started = time.time()
    call(base, "PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/unload?destinationBroker={destination}")
    return {"namespace": namespace, "bundle": bundle, "from": owner, "to": destination, "at": started,
            "took_s": time.time() - started}  # fmt: skip


def unload_namespace(
    namespace: str,
    admin_url_: str | None = None,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Unload every bundle of ``namespace``."""
    base = admin_target(admin_url_, cluster_dir, configuration)
    started = time.time()
    call(base, "PUT", f"/admin/v2/namespaces/{namespace}/unload")
    return {"namespace": namespace, "at": started, "took_s": time.time() - started}
