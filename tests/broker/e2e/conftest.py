"""A real ``magnetar standalone`` process for end-to-end tests with the official client."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

#: the client's own (C++) logger: a Python logger can abort the process at exit
#: (apache/pulsar-client-python#256)
_CLIENT_LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
READY = re.compile(
    r"standalone ready service_url=(\S+) web_service_url=(\S+)"
    r"(?: service_url_tls=(\S+) web_service_url_tls=(\S+))?"
)


class Standalone:
    def __init__(self, data_dir: Path, flags: tuple[str, ...] = (), **settings: object) -> None:
        self.data_dir = data_dir
        #: command-line flags (``--secure``) and broker settings passed as ``--set key=value``
        self.flags = flags
        self.settings = settings
        self.port = 0
        self.web_port = 0
        self.service_url = ""
        self.web_service_url = ""
        #: pulsar+ssl:// and https:// URLs when TLS ports were asked for ("-": that one was not)
        self.service_url_tls = ""
        self.web_service_url_tls = ""
        self.log_path = data_dir / "standalone.log"
        self._process: subprocess.Popen[str] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self, timeout_s: float = 30) -> Standalone:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "magnetar", "standalone", "--data-dir", str(self.data_dir),
            "--port", str(self.port), "--web-port", str(self.web_port), "--log-level", "INFO",
        ]  # fmt: skip
        command += list(self.flags)
        for key, value in self.settings.items():
            command += ["--set", f"{key}={value}"]
        with self.log_path.open("a") as log:
            self._process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        found: list[re.Match[str]] = []
        done = threading.Event()

        def read() -> None:
            assert self._process is not None
            assert self._process.stdout is not None
            for line in self._process.stdout:
                match = READY.search(line)
                if match and not found:
                    found.append(match)
                    done.set()
            done.set()

        threading.Thread(target=read, daemon=True).start()
        done.wait(timeout_s)
        if not found:
            self.kill()
            raise RuntimeError(f"standalone did not start:\n{self.log_path.read_text()[-3000:]}")
        self.service_url, self.web_service_url = found[0].group(1), found[0].group(2)
        self.service_url_tls, self.web_service_url_tls = found[0].group(3) or "", found[0].group(4) or ""
        self.port = int(self.service_url.rsplit(":", 1)[1])
        self.web_port = int(self.web_service_url.rsplit(":", 1)[1])
        return self

    def stop(self, timeout_s: float = 30) -> int:
        process = self._process
        if process is None or process.poll() is not None:
            return 0 if process is None else process.returncode
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout_s)

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def restart(self) -> Standalone:
        self.stop()
        return self.start()

    def client(self, **options: object) -> pulsar.Client:
        settings: dict[str, object] = {"operation_timeout_seconds": 15, "logger": _CLIENT_LOG, **options}
        return pulsar.Client(self.service_url, **settings)


@pytest.fixture
def client(standalone: Standalone) -> Iterator[pulsar.Client]:
    c = standalone.client()
    yield c
    c.close()


def assert_workload_round_trips(run_dir: Path, *args: str) -> None:
    """``magnetar workload`` for 2 s at 50 msg/s on a 2-partition topic (its creation through the
    admin URL in ``args``): every acknowledged send is received."""
    command = [
        sys.executable, "-m", "magnetar", "workload", "--partitions", "2", *args,
        "--duration", "2", "--rate", "50", "--drain", "10", "--run-dir", str(run_dir),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    counters = dict(line.split(": ", 1) for line in done.stdout.splitlines() if line.startswith("w-"))
    sent = int(re.search(r"send_ok (\d+)", counters["w-p0"]).group(1))  # type: ignore[union-attr]
    assert sent > 50
    assert f"ack {sent}" in counters["w-c0"], (counters, done.stderr[-3000:])
