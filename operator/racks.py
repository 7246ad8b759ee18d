"""A bookie's rack from the node it runs on: ``/<value>`` of the node label the cluster's spec
names (``bookies.rackNodeLabel``, ``topology.kubernetes.io/zone`` by default), so the bookies'
rack-aware ensemble placement spreads each entry's copies over zones.

A node's labels are not in the downward API. The operator, which may read nodes, writes the rack
into the pod's ``magnetar.dev/rack`` annotation once the pod is bound to a node; the pod's init
container waits for it, and the bookie reads it from its environment when it starts. The bookie
pods themselves get no Kubernetes credentials for this.
"""

from __future__ import annotations

import logging
from typing import Any

from magnetar.bookie.layout import DEFAULT_RACK
from magnetar.operator.kube_api import Kube
from magnetar.operator.manifests import RACK, RACK_NODE_LABEL

log = logging.getLogger(__name__)


def rack_of(labels: dict[str, str], label: str) -> str:
    """``/<value>`` of the label; a node without it: BookKeeper's rack of a bookie naming none."""
    value = labels.get(label)
    return f"/{value}" if value else DEFAULT_RACK


async def assign(kube: Kube, pod: dict[str, Any]) -> str | None:
    """Write the rack of a scheduled bookie pod that waits for one; the rack written, else None."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    label = annotations.get(RACK_NODE_LABEL)
    node = (pod.get("spec") or {}).get("nodeName")
    if not label or not node or RACK in annotations or meta.get("deletionTimestamp"):
        return None
    labels = await kube.node_labels(node)
    if labels is None:
        return None  # the node went: the pod goes with it
    rack = rack_of(labels, label)
    await kube.annotate_pod(meta["namespace"], meta["name"], {RACK: rack})
    log.info("bookie %s/%s on node %s: rack %s (from %s)", meta["namespace"], meta["name"], node, rack, label)
    return rack
