"""The lab's workload keeps its rate whether its producer sends each message at its own moment
(``--tick-ms 0``) or what is due every 10 ms (the default), and in the second case really sends
in groups: fewer wake-ups for the same messages."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker.e2e.conftest import Standalone

RATE, SECONDS = 500, 2


def send_times(standalone: Standalone, run_dir: Path, tick_ms: str) -> list[int]:
    command = [
        sys.executable, "-m", "magnetar", "workload", "--service-url", standalone.service_url,
        "--topic", f"persistent://public/default/pacing-{tick_ms}", "--rate", str(RATE),
        "--duration", str(SECONDS), "--drain", "10", "--tick-ms", tick_ms, "--run-dir", str(run_dir),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = (run_dir / "events" / "w-p0.jsonl").read_text().splitlines()
    sends = [json.loads(line) for line in lines]
    acked = {e["uid"] for e in sends if e["event"] == "send_ok"}
    times = [e["ts"] for e in sends if e["event"] == "send"]
    assert acked == {e["uid"] for e in sends if e["event"] == "send"}, "every send acknowledged"
    return times


@pytest.mark.parametrize("tick_ms", ["10", "0"])
def test_the_rate_holds_with_or_without_a_tick(standalone: Standalone, tmp_path: Path, tick_ms: str) -> None:
    times = send_times(standalone, tmp_path, tick_ms)
    # what was due in the duration, give or take a tick's worth
    assert RATE * SECONDS * 0.9 <= len(times) <= RATE * SECONDS + 10, len(times)


def test_the_default_tick_sends_what_is_due_together(standalone: Standalone, tmp_path: Path) -> None:
    times = send_times(standalone, tmp_path, "10")
    # a group: sends less than 1 ms apart (one wake-up); five are due each 10 ms at 500 msg/s
    groups = 1 + sum(1 for a, b in itertools.pairwise(times) if b - a >= 1_000_000)
    assert len(times) / groups >= 3, (len(times), groups)
