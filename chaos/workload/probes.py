"""Probes over the run's event log (DESIGN §6): is the workload flowing, was anything lost."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from chaoslib.exceptions import ActivityFailed

__all__ = ["no_acked_loss", "workload_flowing"]


def _events(configuration: dict[str, Any] | None) -> list[dict[str, Any]]:
    run_dir = (configuration or {}).get("magnetar_run_dir")
    if not run_dir:
        raise ActivityFailed("no run directory: run experiments with `magnetar chaos run`")
    found = []
    for path in sorted(Path(run_dir, "events").glob("*.jsonl")):
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
