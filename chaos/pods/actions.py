"""Faults only pods have (``magnetar chaos run --kube``): a pod deleted, as ``kubectl delete pod``
does, and made again by its StatefulSet — a new pod with the old name and volume; a container
killed through the node's CRI, as the kubelet kills one, and started again by the kubelet in the
same pod. Every other fault of the lab acts on pods as well: ``magnetar.chaos.process.actions``
kills and freezes containers through their host PIDs, ``magnetar.chaos.network.actions`` cuts
links between the regions' pods.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.chaos.pods import target as pod_target
from magnetar.chaos.process import targets

__all__ = ["delete_pod", "kill_container"]


def delete_pod(
    role: str = "broker",
    name: str | None = None,
    region: str | None = None,
    grace_period_seconds: int | None = None,
    timeout_s: float = 300.0,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Delete one pod of ``role`` (by ``name``, else at random in ``region``) and wait until its
    StatefulSet has made it again, running and Ready. ``grace_period_seconds``: the pod's own
    grace period when None (a broker hands its bundles over), 0 to kill it at once.

    Example::

        {"type": "action", "name": "delete-a-broker-pod",
         "provider": {"type": "python", "module": "magnetar.chaos.pods.actions",
                      "func": "delete_pod", "arguments": {"role": "broker", "region": "jp-east"}}}
    """
    path = _pods(cluster_dir, configuration, "delete_pod")
    victim = targets.pick(targets.load(path), role, name=name, region=region, running=None)
    started = time.time()
    uid = pod_target.delete_pod(path, victim.name, grace_period_seconds)
    successor = pod_target.wait_running(path, victim.name, timeout_s, replacing=uid)
    return {
        "name": victim.name, "region": victim.region, "deleted_uid": uid, "address": successor.address,
        "at": started, "ready_after_s": round(time.time() - started, 3),
    }  # fmt: skip


def kill_container(
    role: str = "broker",
    name: str | None = None,
    region: str | None = None,
    grace_period_seconds: int = 0,
    timeout_s: float = 300.0,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Stop the container of one pod of ``role`` (by ``name``, else at random in ``region``)
    through the node's CRI (``crictl stop``), and wait until the kubelet has started a new one
    in the same pod, running and Ready. ``grace_period_seconds``: 0 kills it at once (SIGKILL);
    more sends SIGTERM first and SIGKILL after that long.

    Example::

        {"type": "action", "name": "kill-a-bookie-container",
         "provider": {"type": "python", "module": "magnetar.chaos.pods.actions",
                      "func": "kill_container", "arguments": {"role": "bookie", "region": "jp-east"}}}
    """
    path = _pods(cluster_dir, configuration, "kill_container")
    victim = targets.pick(targets.load(path), role, name=name, region=region, running=True)
    started = time.time()
    container = pod_target.stop_container(path, victim.name, grace_period_seconds)
    successor = pod_target.wait_running(path, victim.name, timeout_s, restarting=container)
    return {
        "name": victim.name, "region": victim.region, "killed_container": container,
        "address": successor.address, "at": started, "ready_after_s": round(time.time() - started, 3),
    }  # fmt: skip


def _pods(cluster_dir: str | None, configuration: dict[str, Any] | None, action: str) -> Path:
    """The run's cluster directory, which must be one of pods."""
    path = targets.cluster_dir(cluster_dir, configuration)
    if not pod_target.is_kube(path):
        raise ActivityFailed(f"{path} is a local cluster: {action} acts on pods (chaos run --kube)")
    return path
