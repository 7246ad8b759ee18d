"""A local storage cluster for benchmarks: a real ZooKeeper and N bookie processes on loopback.

async with LocalStorageCluster(workdir, bookies=3) as cluster:
    store = await cluster.open_store()
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from magnetar.common.metadata import MetadataStore, open_store
from magnetar.local.zookeeper import ZooKeeperServer

READY_PREFIX = "bookie ready "


class LocalStorageCluster:
    def __init__(self, workdir: Path, *, bookies: int, **settings: str) -> None:
        self.workdir = workdir
        self.count = bookies
        self.settings = settings
        self.zookeeper = ZooKeeperServer(workdir / "zookeeper")
        self.processes: list[subprocess.Popen[str]] = []
        self.addresses: list[str] = []

    @property
    def url(self) -> str:
        return self.zookeeper.url("/bench")

    def _start_bookie(self, index: int) -> subprocess.Popen[str]:
        root = self.workdir / f"bookie-{index}"
        root.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "magnetar", "bookie", "--port", "0",
            "--journal-dir", str(root / "journal"), "--ledger-dir", str(root / "ledgers"),
            "--metadata-service-uri", self.url, "--set", "prometheus_stats_http_port=0",
        ]  # fmt: skip
        for key, value in self.settings.items():
            command += ["--set", f"{key}={value}"]
        log = (root / "bookie.log").open("a")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        log.close()
        return process

    def _wait_ready(self, process: subprocess.Popen[str]) -> str:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(READY_PREFIX):
                return line[len(READY_PREFIX) :].split()[0]
        raise RuntimeError(f"a bookie exited before it was ready (logs under {self.workdir})")

    def start(self) -> None:
        self.zookeeper.start()
        self.processes = [self._start_bookie(i) for i in range(self.count)]
        self.addresses = [self._wait_ready(p) for p in self.processes]

    def kill(self, index: int) -> str:
        """kill -9 one bookie; returns its address (its id)."""
        self.processes[index].kill()
        self.processes[index].wait()
        return self.addresses[index]

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
        self.zookeeper.stop()

    async def open_store(self) -> MetadataStore:
        return await open_store(self.url)

    async def __aenter__(self) -> LocalStorageCluster:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)
