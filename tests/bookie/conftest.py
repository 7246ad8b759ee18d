"""Real bookie processes for tests (this folder and ``tests/bookie/client/``).

``bookie_factory`` starts ``python -m magnetar bookie`` as an OS process on 127.0.0.1, with its
own journal and ledger directories under ``tmp_path``, and waits for its "bookie ready" line::

    def test_something(bookie_factory):
        bookie = bookie_factory()                       # started and serving
        bookie.address                                  # "127.0.0.1:<port>" for a gRPC channel
        bookie.bookie_id                                # id it registers under (== address)
        bookie.kill()                                   # kill -9, waits for the process to go
        bookie.start()                                  # same dirs, same port: replays its journal
        bookie.stop()                                   # SIGTERM: flushes, exits cleanly (returns rc)
        bookie.restart()                                # stop() + start(); restart(kill=True) kills

    async def test_async(bookie_factory):
        bookie = await bookie_factory.start_async(metadata_service_uri="zk://127.0.0.1:2181/x")
        await bookie.kill_async(); await bookie.start_async(); await bookie.stop_async()

``bookie_factory(metadata_service_uri=None, name=None, start=True, **settings)``: ``settings``
are BookieConfig fields passed as ``--set key=value`` (e.g. ``journal_sync_data=False``,
``flush_interval=500``). ``bookie.log_path`` holds the process's stderr (shown in a failure
message when it does not start). Every process still running is killed at teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

READY_PREFIX = "bookie ready "
METRICS_PREFIX = "bookie metrics "


class BookieProcess:
    def __init__(self, root: Path, metadata_service_uri: str | None, settings: dict[str, Any]) -> None:
        self.root = root
        self.journal_dir = root / "journal"
        self.ledger_dir = root / "ledgers"
        self.log_path = root / "bookie.log"
        self.metadata_service_uri = metadata_service_uri
        self.settings = settings
        self.port = 0
        self.address = ""
        self.bookie_id = ""
        self._process: subprocess.Popen[str] | None = None
        self._metrics: list[str] = []

    @property
    def metrics_url(self) -> str:
        """``http://host:port/metrics`` of the running bookie."""
        return self._metrics[0]

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def _command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "magnetar",
            "bookie",
            "--port",
            str(self.port),
            "--journal-dir",
            str(self.journal_dir),
            "--ledger-dir",
            str(self.ledger_dir),
        ]
        if self.metadata_service_uri:
            command += ["--metadata-service-uri", self.metadata_service_uri]
        command += ["--set", "prometheus_stats_http_port=0"]  # several bookies on one host
        for key, value in self.settings.items():
            command += ["--set", f"{key}={json.dumps(value)}"]
        return command

    def start(self, timeout_s: float = 30.0) -> BookieProcess:
        """Start (again, on the same dirs and port once it has one) and wait until ready."""
        if self.running:
            raise RuntimeError(f"bookie {self.address} is already running")
        self.root.mkdir(parents=True, exist_ok=True)
        log_file = self.log_path.open("a")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._process = subprocess.Popen(
            self._command(), stdout=subprocess.PIPE, stderr=log_file, text=True, env=env
        )
        log_file.close()
        ready = self._wait_ready(self._process, timeout_s, self._metrics)
        if ready is None:
            self.kill()
            raise RuntimeError(
                f"bookie did not get ready within {timeout_s}s; log {self.log_path}:\n"
                + self.log_path.read_text()[-4000:]
            )
        self.address, _, bookie_id = ready.partition(" id=")
        self.bookie_id = bookie_id.strip()
        self.port = int(self.address.rsplit(":", 1)[1])
        return self

    @staticmethod
    def _wait_ready(process: subprocess.Popen[str], timeout_s: float, metrics: list[str]) -> str | None:
        found: list[str] = []
        done = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith(METRICS_PREFIX):
                    metrics[:] = [line[len(METRICS_PREFIX) :].strip()]
                if line.startswith(READY_PREFIX) and not found:
                    found.append(line[len(READY_PREFIX) :].strip())
                    done.set()
            done.set()  # stdout closed: the process exited

        threading.Thread(target=read, daemon=True).start()
        done.wait(timeout_s)
        return found[0] if found else None

    def stop(self, timeout_s: float = 20.0) -> int:
        """SIGTERM and wait: the bookie flushes its journal and exits. Returns the exit code."""
        process = self._process
        if process is None or process.poll() is not None:
            return process.returncode if process is not None else 0
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"bookie {self.address} ignored SIGTERM for {timeout_s}s; killed") from None

    def kill(self) -> None:
        """kill -9: nothing is flushed."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def restart(self, *, kill: bool = False, timeout_s: float = 30.0) -> BookieProcess:
        self.kill() if kill else self.stop()
        return self.start(timeout_s)

    async def start_async(self, timeout_s: float = 30.0) -> BookieProcess:
        return await asyncio.to_thread(self.start, timeout_s)

    async def stop_async(self, timeout_s: float = 20.0) -> int:
        return await asyncio.to_thread(self.stop, timeout_s)

    async def kill_async(self) -> None:
        await asyncio.to_thread(self.kill)

    async def restart_async(self, *, kill: bool = False, timeout_s: float = 30.0) -> BookieProcess:
        return await asyncio.to_thread(lambda: self.restart(kill=kill, timeout_s=timeout_s))


class BookieFactory:
    def __init__(self, root: Path) -> None:
        self._root = root
        self.bookies: list[BookieProcess] = []

    def __call__(
        self,
        metadata_service_uri: str | None = None,
        name: str | None = None,
        *,
        start: bool = True,
        **settings: Any,
    ) -> BookieProcess:
        name = name or f"bookie-{len(self.bookies)}"
        bookie = BookieProcess(self._root / name, metadata_service_uri, settings)
        self.bookies.append(bookie)
        return bookie.start() if start else bookie

    async def start_async(
        self, metadata_service_uri: str | None = None, name: str | None = None, **settings: Any
    ) -> BookieProcess:
        bookie = self(metadata_service_uri, name, start=False, **settings)
        return await bookie.start_async()

    def close(self) -> None:
        for bookie in self.bookies:
            with contextlib.suppress(RuntimeError):  # stop() already killed it
                bookie.stop(timeout_s=5)


@pytest.fixture
def bookie_factory(tmp_path: Path) -> Iterator[BookieFactory]:
    factory = BookieFactory(tmp_path / "bookies")
    yield factory
    factory.close()
