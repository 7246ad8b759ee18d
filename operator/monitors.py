"""The Prometheus Operator's ``PodMonitor`` of each component of a cluster, so a Prometheus that
selects them scrapes every bookie's and broker's ``/metrics`` without further configuration.

They are made only where the API server serves ``monitoring.coreos.com/v1`` PodMonitors (the
Prometheus Operator's CRDs are installed), looked up at each reconcile: without them the operator
makes nothing and reports nothing, and a cluster reconciled after the CRDs arrive gets its monitors.
ZooKeeper gets none: the official image serves no Prometheus endpoint unless configured to.
"""

from __future__ import annotations

from magnetar.operator.manifests import Manifest, labels

GROUP = "monitoring.coreos.com"
VERSION = "v1"
KIND = "PodMonitor"
#: the container port each component serves ``/metrics`` on (manifests.py names them)
METRICS_PORTS = {"bookie": "metrics", "broker": "http", "broker-readonly": "http"}
#: how often Prometheus scrapes: a fraction of the dashboards' shortest rate() window (1m)
INTERVAL = "15s"


def pod_monitors(name: str, components: list[str]) -> list[Manifest]:
    """One PodMonitor per component of ``components`` that serves metrics."""
    return [
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": f"{name}-{component}", "labels": labels(name, component)},
            "spec": {
                "selector": {"matchLabels": labels(name, component)},
                "podMetricsEndpoints": [
                    {"port": METRICS_PORTS[component], "path": "/metrics", "interval": INTERVAL}
                ],
            },
        }
        for component in components
        if component in METRICS_PORTS
    ]
