"""A broker whose ZooKeeper has gone, frozen or killed, still exits on SIGTERM within its
broker_shutdown_timeout_ms: leaving the cluster, moving bundles away and closing the sessions give
up instead of waiting for a store that never answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from magnetar.local.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper

#: the broker_shutdown_timeout_ms the test sets: short, as the test is about the bound being kept,
#: not its length
BOUND_S = 5.0
#: for the interpreter's own exit after the bounded shutdown
EXIT_SLACK_S = 2.0


@pytest.fixture
def broker_process(
    own_zookeeper: ZooKeeperServer, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    log_path = tmp_path / "broker.log"
    command = [
        sys.executable, "-m", "magnetar", "broker", "--metadata-store-url", own_zookeeper.url("/broker"),
        "--port", "0", "--web-port", "0",
        # a session timeout longer than the bound: kazoo's own stop waits up to it while ZooKeeper
        # does not answer
        "--set", "metadata_store_session_timeout_millis=30000",
        "--set", f"broker_shutdown_timeout_ms={int(BOUND_S * 1000)}",
    ]  # fmt: skip
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("broker ready"):
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    assert ready.wait(60), log_path.read_text()[-3000:]
    assert process.poll() is None, log_path.read_text()[-3000:]
    yield process, log_path
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.mark.parametrize("gone", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "frozen"])
def test_sigterm_exits_within_the_bound_whatever_zookeeper_does(
    broker_process: tuple[subprocess.Popen[str], Path], own_zookeeper: ZooKeeperServer, gone: signal.Signals
) -> None:
    process, log_path = broker_process
    assert own_zookeeper.pid is not None
    os.kill(own_zookeeper.pid, gone)
    time.sleep(1.0)  # kazoo notices: requests made from now on wait for a reconnection

    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(BOUND_S + EXIT_SLACK_S)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"the broker ignored SIGTERM for {BOUND_S + EXIT_SLACK_S}s: {log_path.read_text()[-3000:]}"
        )
    elapsed = time.monotonic() - started
    assert code == 0, log_path.read_text()[-3000:]
    assert elapsed < BOUND_S + EXIT_SLACK_S
