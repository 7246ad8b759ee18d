"""The run's directory, where the workload writes its event log (architecture §6) and its own logs:
the experiment's configuration key ``magnetar_run_dir``, else ``MAGNETAR_RUN_DIR``, else a fresh
``runs/chaos-<time>/`` made once per process, so the stock ``chaos run`` of an experiment has
one directory for every activity of that run (``magnetar chaos run`` always sets the key)."""

from __future__ import annotations

import logging
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from magnetar.common.run_directory import RUNS, make_run_dir

CONFIGURATION_KEY = "magnetar_run_dir"
ENVIRONMENT_KEY = "MAGNETAR_RUN_DIR"

log = logging.getLogger("chaostoolkit")
_fresh: Path | None = None
_lock = threading.Lock()


def run_dir(configuration: dict[str, Any] | None) -> Path:
    """The run directory (made, with its ``events/``, if missing)."""
    chosen = (configuration or {}).get(CONFIGURATION_KEY) or os.environ.get(ENVIRONMENT_KEY)
    path = Path(chosen) if chosen else _fresh_run_dir()
    return make_run_dir(path).resolve()


def _fresh_run_dir() -> Path:
    global _fresh
    with _lock:
        if _fresh is None:
            _fresh = RUNS / f"chaos-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S.%fZ')}"
            log.info(f"run directory {_fresh} (set {CONFIGURATION_KEY} or {ENVIRONMENT_KEY} to choose one)")
        return _fresh
