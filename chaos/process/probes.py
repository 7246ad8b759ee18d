"""Probes on the processes of a local cluster."""

from __future__ import annotations

from typing import Any

from magnetar.chaos.process import targets
from magnetar.local.supervisor import alive, process_state

__all__ = ["cluster_healthy", "process_running", "processes_down"]


def cluster_healthy(cluster_dir: str | None = None, configuration: dict[str, Any] | None = None) -> bool:
    """True when every process the cluster started runs and none is frozen."""
    state = targets.load(targets.cluster_dir(cluster_dir, configuration))
    return all(alive(p.pid) and process_state(p.pid) != "T" for p in state.processes)


def processes_down(cluster_dir: str | None = None, configuration: dict[str, Any] | None = None) -> list[str]:
    """Names of the processes that are not running, or frozen."""
    state = targets.load(targets.cluster_dir(cluster_dir, configuration))
    return [p.name for p in state.processes if not alive(p.pid) or process_state(p.pid) == "T"]


def process_running(
    name: str, cluster_dir: str | None = None, configuration: dict[str, Any] | None = None
) -> bool:
    """True when the named process runs (and is not frozen)."""
    state = targets.load(targets.cluster_dir(cluster_dir, configuration))
    record = next((p for p in state.processes if p.name == name), None)
    return record is not None and alive(record.pid) and process_state(record.pid) != "T"
