"""Probes over the run's event log (architecture §6): is the workload flowing, was anything lost."""

from __future__ import annotations

import json
import time
from typing import Any

from magnetar.chaos.workload.rundir import run_dir
from magnetar.common.run_directory import Layout

__all__ = ["no_acked_loss", "workload_flowing"]


def _events(configuration: dict[str, Any] | None) -> list[dict[str, Any]]:
    found = []
    for path in sorted((run_dir(configuration) / Layout.EVENTS).glob(f"*{Layout.EVENT_LOG_SUFFIX}")):
        for line in path.read_text().splitlines():
            if line.strip():
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue  # a line being written right now
    return found


def workload_flowing(window_s: float = 5, configuration: dict[str, Any] | None = None) -> bool:
    """True when sends were acknowledged and messages received within the last ``window_s``."""
    since = (time.time() - window_s) * 1e9
    recent = {e["event"] for e in _events(configuration) if e["ts"] >= since}
    return {"send_ok", "receive"} <= recent


def no_acked_loss(configuration: dict[str, Any] | None = None) -> bool:
    """True when every acknowledged send was received by its subscription (call it after the
    workload has stopped and drained)."""
    events = _events(configuration)
    acked = {e["uid"] for e in events if e["event"] == "send_ok"}
    received = {e["uid"] for e in events if e["event"] == "receive"}
    return acked <= received
