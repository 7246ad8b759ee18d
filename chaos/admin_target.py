"""Where an activity sends admin requests: the experiment's ``magnetar_admin_url``, else the
first running broker of the local cluster. Pulsar-compatible paths only, so the same actions
work against Apache Pulsar."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.chaos.local.supervisor import alive
from magnetar.chaos.process import targets


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
    url = base + path
    data = None if body is None else json.dumps(body).encode()
    for _ in range(3):
        request = urllib.request.Request(
            url, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read().decode()
                return json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            if exc.code in (307, 308) and exc.headers.get("Location"):
                url = exc.headers["Location"]
                continue
            raise ActivityFailed(f"{method} {path}: HTTP {exc.code}: {exc.read().decode()[:300]}") from None
        except urllib.error.URLError as exc:
            raise ActivityFailed(f"cannot reach {base}: {exc.reason}") from None
    raise ActivityFailed(f"{method} {path}: too many redirects")
