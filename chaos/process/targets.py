"""Finding the cluster and the process an activity is about."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.chaos.pods import is_kube
from magnetar.local.supervisor import ClusterState, LocalClusterError, ProcessRecord, alive

CONFIGURATION_KEY = "magnetar_cluster_dir"
ENVIRONMENT_KEY = "MAGNETAR_CLUSTER_DIR"
LATEST = Path("runs/latest-cluster")


def cluster_dir(explicit: str | None, configuration: dict[str, Any] | None) -> Path:
    """The cluster directory: the argument, the configuration, the environment, or the latest;
    a local cluster's (``state.json``) or pods' (``pod_target.json``, magnetar.chaos.pods)."""
    chosen = explicit or (configuration or {}).get(CONFIGURATION_KEY) or os.environ.get(ENVIRONMENT_KEY)
    path = Path(chosen) if chosen else LATEST
    if not (path / "state.json").exists() and not is_kube(path):
        raise ActivityFailed(
            f"no local cluster at {path}: start one with `magnetar local up`, or set cluster_dir, the "
            f"configuration key {CONFIGURATION_KEY} or {ENVIRONMENT_KEY}"
        )
    return path.resolve()


def load(directory: Path) -> ClusterState:
    if is_kube(directory):
        # imported for pods only: it loads the operator and the Kubernetes client, seconds of a
        # local run's every activity process otherwise
        from magnetar.chaos.pods import target as pod_target

        return pod_target.live_state(directory)
    try:
        return ClusterState.load(directory)
    except LocalClusterError as exc:
        raise ActivityFailed(str(exc)) from exc


def pick(
    state: ClusterState,
    role: str,
    *,
    name: str | None = None,
    region: str | None = None,
    index: int | None = None,
    running: bool | None = True,
) -> ProcessRecord:
    """One process of ``role``: by name, by region and index, or at random among the matching
    ones (``running`` True: only running ones; False: only stopped ones; None: any)."""
    candidates = [p for p in state.processes if p.role == role and (region is None or p.region == region)]
    if name is not None:
        candidates = [p for p in candidates if p.name == name]
    elif index is not None:
        candidates = [p for p in candidates if p.name.endswith(f"-{role}-{index}")]
    if running is not None:
        candidates = [p for p in candidates if alive(p.pid) == running]
    if not candidates:
        wanted = (
            name
            or f"{role} {'in ' + region if region else ''} {'#' + str(index) if index is not None else ''}"
        )
        state_word = {True: "running ", False: "stopped ", None: ""}[running]
        raise ActivityFailed(f"no {state_word}{wanted.strip()} in the local cluster {state.directory}")
    return random.choice(candidates)
