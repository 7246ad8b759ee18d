"""Running one experiment of chaos/experiments/ the way a user does (``magnetar chaos run``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "chaos" / "experiments"


def run(
    experiment: str, cluster: Path, *, run_id: str = "", env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run ``experiment`` against the local cluster in ``cluster`` without its post-mortem; the
    result and the run directory (``runs/<run_id>`` beside the cluster directory)."""
    run_id = run_id or experiment
    workdir = cluster.parent
    result = subprocess.run(
        [sys.executable, "-m", "magnetar", "chaos", "run", str(EXPERIMENTS / f"{experiment}.yaml"),
         "--cluster-dir", str(cluster), "--run-id", run_id, "--no-postmortem"],
        capture_output=True, text=True, timeout=600, cwd=workdir, env={**os.environ, **(env or {})},
    )  # fmt: skip
    return result, workdir / "runs" / run_id
