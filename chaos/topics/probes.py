"""Probes that read topic statistics through the admin REST API (``/admin/v2/persistent/.../stats``,
Pulsar's path and field names, so they also work against Apache Pulsar)."""

from __future__ import annotations

import time
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.chaos.admin_target import admin_target, call

__all__ = ["backlog_drained", "subscription_backlog"]


def _stats_path(topic: str) -> str:
    prefix = "persistent://"
    if not topic.startswith(prefix):
        raise ActivityFailed(f"expected persistent://tenant/namespace/topic, got {topic!r}")
    return f"/admin/v2/persistent/{topic[len(prefix) :]}/stats"


def subscription_backlog(
    topic: str,
    admin_url_: str | None = None,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> dict[str, int]:
    """The backlog (``msgBacklog``: messages not yet acknowledged) of every subscription of
    ``topic``, by subscription name."""
    stats = call(admin_target(admin_url_, cluster_dir, configuration), "GET", _stats_path(topic))
    return {name: int(sub.get("msgBacklog", 0)) for name, sub in (stats.get("subscriptions") or {}).items()}


def backlog_drained(
    topic: str,
    subscription: str | None = None,
    timeout_s: float = 30,
    admin_url_: str | None = None,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> bool:
    """True once ``subscription`` (default: every subscription of ``topic``) has nothing left to
    acknowledge; waits up to ``timeout_s`` for consumers to catch up after a fault, then False.

    Example step of a steady-state hypothesis::

        {"type": "probe", "name": "consumers-caught-up", "tolerance": true,
         "provider": {"type": "python", "module": "magnetar.chaos.topics.probes",
                      "func": "backlog_drained",
                      "arguments": {"topic": "persistent://public/default/orders"}}}
    """
    deadline = time.monotonic() + timeout_s
    while True:
        backlog = subscription_backlog(topic, admin_url_, cluster_dir, configuration)
        if subscription is not None and subscription not in backlog:
            raise ActivityFailed(f"{topic} has no subscription {subscription!r} (it has {sorted(backlog)})")
        left = backlog[subscription] if subscription is not None else sum(backlog.values())
        if left == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)
