"""``magnetar standalone`` as a user runs it: Ctrl-C stops it cleanly, and bad settings are refused
with a clear message."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker.e2e.conftest import Standalone


def test_ctrl_c_stops_standalone_cleanly(tmp_path: Path) -> None:
    server = Standalone(tmp_path / "standalone").start()
    client = server.client()
    client.create_producer("persistent://public/default/ctrl-c").send(b"x")
    client.close()
    assert server._process is not None
    server._process.send_signal(signal.SIGINT)
    assert server._process.wait(30) == 0
    assert "Traceback" not in server.log_path.read_text()


@pytest.mark.parametrize(("setting", "complaint"), [
    ("no_such_setting=1", "no_such_setting"),
    ("max_message_size=-1", "max_message_size"),
])  # fmt: skip
def test_unknown_settings_and_bad_values_are_refused(tmp_path: Path, setting: str, complaint: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "magnetar", "standalone", "--data-dir", str(tmp_path), "--port", "0",
         "--web-port", "0", "--set", setting],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert complaint in result.stderr
    assert "Traceback" not in result.stderr
