"""Ports chosen for the servers a test or a local cluster starts: never from the ephemeral range (where any
outgoing connection may take one before the server binds it), never one something holds, and
never the same one to two processes choosing at once."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from magnetar.common import ports
from magnetar.common.ports import free_port


def test_ports_lie_below_the_ephemeral_range_and_do_not_repeat(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    chosen = [free_port(counter=counter) for _ in range(200)]
    low, _ = ports.ephemeral_range()
    assert all(ports.LOWEST <= port < low for port in chosen)
    assert len(set(chosen)) == len(chosen), "no port handed out twice"


def test_a_port_something_listens_on_is_passed_over(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    held = free_port(counter=counter) + 1
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", held))
        listener.listen()
        assert free_port(counter=counter) != held


def test_the_turn_wraps_round_to_the_lowest_port(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text(str(ports.HIGHEST + 1))
    assert free_port(counter=counter) < ports.LOWEST + 1_000


def test_two_processes_choosing_at_once_get_different_ports(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from magnetar.common.ports import free_port\n"
        "print(*(free_port(counter=Path(sys.argv[1])) for _ in range(300)))\n"
    )
    choosers = [
        subprocess.Popen([sys.executable, "-c", script, str(counter)], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    chosen = [int(port) for chooser in choosers for port in chooser.communicate(timeout=60)[0].split()]
    assert len(chosen) == 900
    assert len(set(chosen)) == len(chosen), "a port went to two processes"


def test_with_no_room_below_the_ephemeral_range_the_kernel_chooses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (ports.LOWEST + 10, 60_999))
    port = free_port(counter=tmp_path / "counter")
    assert port >= ports.LOWEST + 10
    assert not (tmp_path / "counter").exists(), "the counter is not used"


def test_without_a_temporary_directory_the_module_loads_and_the_kernel_chooses() -> None:
    # As in a pod whose root file system is read-only: `magnetar --help` imports this module.
    script = (
        "import tempfile\n"
        "def none():\n"
        "    raise FileNotFoundError('No usable temporary directory found')\n"
        "tempfile.gettempdir = none\n"
        "from magnetar.common.ports import free_port\n"
        "print(free_port())\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 0
