"""A real ZooKeeper server as a child process, from Debian's ``zookeeper`` package.

Used by the test fixtures and by local clusters: it binds to loopback on a free port, keeps its
data under a directory of the caller's, and is stopped by whoever started it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from magnetar.common.ports import free_port

#: where Debian's package puts the server; ZOOKEEPER_CLASSPATH overrides
DEBIAN_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeperUnavailableError(RuntimeError):
    pass


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """``with ZooKeeperServer(tmp_dir) as zk: zk.url("/chroot")`` -> ``zk://127.0.0.1:PORT/chroot``."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        tick_time_ms: int = 200,
        max_session_timeout_ms: int = 30_000,
        detached: bool = False,
        heap: str = "256m",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        #: the JVM's -Xmx: ZooKeeper keeps every node in memory (some 400 bytes of heap a node,
        #: four nodes a topic: 256m runs out near 100,000 topics)
        self.heap = heap
        #: in its own session, to outlive the command that started it (``magnetar local up``)
        self.detached = detached
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def url(self, chroot: str = "") -> str:
        return f"zk://{self.address}{chroot}"

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "data").mkdir(exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    # Short minimum so tests can ask for short sessions (2 ticks), long maximum.
                    f"minSessionTimeout={2 * self.tick_time_ms}",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    "maxClientCnxns=0",
                    # While ZooKeeper is paused (a long GC, a frozen host), every client retries
                    # its connection and the default backlog of 50 fills; later SYNs are dropped and
                    # their clients reconnect seconds after ZooKeeper is back (TCP's SYN backoff).
                    "clientPortListenBacklog=4096",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat,mntr",
                    "",
                ]
            )
        )
        return config

    def start(self, timeout_s: float = 60.0) -> None:
        java = shutil.which("java")
        classpath = os.environ.get("ZOOKEEPER_CLASSPATH", DEBIAN_CLASSPATH)
        jar = classpath.split(":")[-1]
        if java is None or not Path(jar).exists():
            raise ZooKeeperUnavailableError(
                f"ZooKeeper needs java and {jar}: install Debian's zookeeper package "
                "(`make test` does) or set ZOOKEEPER_CLASSPATH"
            )
        config = self._write_config()
        command = [
            java,
            f"-Xmx{self.heap}",
            "-Dzookeeper.root.logger=INFO,CONSOLE",
            "-Dzookeeper.console.threshold=INFO",
            f"-Dzookeeper.log.dir={self.data_dir}",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(config),
        ]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=self.detached,
            )
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise ZooKeeperUnavailableError(
                    f"ZooKeeper exited with {self._process.returncode}; log {self.log_path}:\n"
                    + self.log_path.read_text(errors="replace")[-3000:]
                )
            with contextlib.suppress(OSError):
                if four_letter_word(self.host, self.port, "ruok") == "imok":
                    return
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperUnavailableError(f"ZooKeeper not ready on {self.address} after {timeout_s}s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
