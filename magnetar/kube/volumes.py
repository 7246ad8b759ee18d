"""Storage for the node's pods: a default StorageClass and statically provisioned ``local``
PersistentVolumes, one directory each under the state directory.

Local clusters do the same (static provisioning): the hostpath provisioner makes root-owned 0750
directories, which pods running as a non-root user (Magnetar's run as 10000) cannot write. These
directories are mode 0777, and a released volume stays Released (no recycler): a fresh node has fresh
volumes, and `down` removes them with the rest of the state directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from magnetar.kube.layout import NODE_NAME, Layout

STORAGE_CLASS = "standard"
DEFAULT_VOLUMES = 24
VOLUME_SIZE = "10Gi"


def storage_class() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "kubernetes.io/no-provisioner",
        # bound only once a pod is scheduled, as local volumes need (the pod's node holds the data)
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Retain",
    }


def volume(name: str, path: Path) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"magnetar.dev/node-volume": "true"}},
        "spec": {
            "capacity": {"storage": VOLUME_SIZE},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": STORAGE_CLASS,
            "local": {"path": str(path)},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_NAME]}
                            ]
                        }
                    ]
                }
            },
        },
    }


def make_directories(layout: Layout, count: int) -> list[Path]:
    paths = []
    for i in range(count):
        path = layout.volumes / f"pv-{i:03d}"
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)  # mkdir's mode is masked by the umask; any pod user writes here
        paths.append(path)
    return paths


def manifests(layout: Layout, count: int) -> str:
    """The StorageClass and ``count`` volumes as one kubectl-appliable List; makes their directories."""
    items = [storage_class()] + [
        volume(f"{NODE_NAME}-pv-{i:03d}", path) for i, path in enumerate(make_directories(layout, count))
    ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
