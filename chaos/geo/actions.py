"""Geo-replication actions: make a namespace replicated across regions, move the workload's
consumers to another region (a consumer failover, as an application would do it)."""

from __future__ import annotations

import json
import time
from typing import Any

from magnetar.chaos.admin_target import admin_target, call
from magnetar.chaos.workload.rundir import run_dir
from magnetar.common.run_directory import Layout

__all__ = ["move_consumers", "replicated_namespace"]


def replicated_namespace(
    namespace: str,
    clusters: list[str],
    snapshot_frequency_millis: int | None = None,
    admin_url_: str | None = None,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Create ``namespace`` (and its tenant) replicated to ``clusters``, or set its clusters if
    it exists (``pulsar-admin namespaces create --clusters`` / ``set-clusters``)."""
    base = admin_target(admin_url_, cluster_dir, configuration)
    tenant = namespace.split("/")[0]
    if tenant not in call(base, "GET", "/admin/v2/tenants"):
        call(base, "PUT", f"/admin/v2/tenants/{tenant}", {"allowedClusters": clusters})
    if namespace in call(base, "GET", f"/admin/v2/namespaces/{tenant}"):
        call(base, "POST", f"/admin/v2/namespaces/{namespace}/replication", clusters)
    else:
        call(base, "PUT", f"/admin/v2/namespaces/{namespace}", {"replication_clusters": clusters})
    if snapshot_frequency_millis is not None:
        call(
            base,
            "POST",
            f"/admin/v2/namespaces/{namespace}/replicatedSubscriptionsSnapshotFrequency",
            snapshot_frequency_millis,
        )
    return {"namespace": namespace, "clusters": clusters}


def move_consumers(
    cluster: str, prefix: str = "w", consumers: int = 1, configuration: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Tell the consumers of workload ``prefix`` to continue in region ``cluster`` (their
    control files): each closes its consumer and subscribes there under the same name."""
    directory = run_dir(configuration)
    (directory / Layout.CONTROL).mkdir(parents=True, exist_ok=True)
    for index in range(consumers):
        path = Layout.control(directory, f"{prefix}-c{index}")
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"cluster": cluster}))
        tmp.replace(path)
    return {"prefix": prefix, "cluster": cluster, "consumers": consumers, "at": time.time()}
