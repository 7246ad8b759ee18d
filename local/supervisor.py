"""Start, record, inspect and stop the processes of a local cluster.

Every process is started in its own session (so a terminal's Ctrl-C reaches only the command
that was running), writes stdout and stderr to ``<cluster dir>/<name>.log``, and announces
itself with a ready line that the supervisor reads from that log. The state file is written
after every start, so even an ``up`` that fails half-way leaves a record ``down`` can use.

A cluster file's ``security`` section secures every broker (see ``security``); the state then
records, under ``security``, the credentials and CA the lab's own clients use.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from magnetar.common.ports import free_port
from magnetar.local import links
from magnetar.local.secured_cluster import ClusterSecrets
from magnetar.local.spec import ClusterSpec, RegionSpec
from magnetar.local.zookeeper import ZooKeeperServer

STATE_FILE = "state.json"
CONFIGURATION_CHROOT = "/configuration"


class LocalClusterError(RuntimeError):
    pass


@dataclass
class ProcessRecord:
    name: str
    role: str  # zookeeper | bookie | broker
    region: str
    pid: int
    log: str
    address: str = ""
    #: what the ready line announced (service_url, web_service_url, metrics, id, ...)
    endpoints: dict[str, str] = field(default_factory=dict)
    #: ``magnetar`` arguments it was started with (a restart pins the port it bound)
    arguments: list[str] = field(default_factory=list)
    #: a process that is not Magnetar's (Apache Pulsar's broker, for side-by-side runs): its whole
    #: command line, run as it is on a restart, and the text its log prints once it is ready
    command: list[str] = field(default_factory=list)
    ready_text: str = ""
    #: a link proxy: the region whose traffic it carries into ``region`` (empty: every region's,
    #: a front door)
    peer: str = ""


@dataclass
class ClusterState:
    name: str
    directory: str
    zookeeper: str = ""
    configuration_store: str = ""
    regions: dict[str, dict[str, str]] = field(default_factory=dict)
    processes: list[ProcessRecord] = field(default_factory=list)
    #: a secured cluster's client side (secured_cluster.ClusterSecrets.client_settings); empty: open
    security: dict[str, str] = field(default_factory=dict)

    def save(self) -> None:
        path = Path(self.directory) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, directory: Path) -> ClusterState:
        path = directory / STATE_FILE
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise LocalClusterError(
                f"no local cluster recorded in {directory} ({STATE_FILE} missing)"
            ) from None
        processes = [ProcessRecord(**p) for p in doc.pop("processes", [])]
        return cls(**doc, processes=processes)

    def find(self, role: str, region: str | None = None) -> list[ProcessRecord]:
        return [p for p in self.processes if p.role == role and (region is None or p.region == region)]


def alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def process_state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (R, S, T stopped, Z zombie...); X when gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split()[1]
    except OSError:
        pass
    return "X"


def _belongs(record: ProcessRecord) -> bool:
    """The pid is still the process we started (pids are reused), judged by its command line."""
    try:
        cmdline = Path(f"/proc/{record.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    if record.command:
        return cmdline.split() == " ".join(record.command).split()
    return ("magnetar" in cmdline) or ("zookeeper" in cmdline.lower())


class Supervisor:
    def __init__(self, directory: Path, *, on_status: Callable[[str], None] = lambda _msg: None) -> None:
        self.directory = directory
        self._say = on_status

    # -- up -------------------------------------------------------------------------------------
    def up(self, spec: ClusterSpec, *, timeout_s: float = 60.0) -> ClusterState:
        self.directory.mkdir(parents=True, exist_ok=True)
        if (self.directory / STATE_FILE).exists() and any(
            alive(p.pid) for p in ClusterState.load(self.directory).processes
        ):
            raise LocalClusterError(f"a cluster is already running from {self.directory}; run `down` first")
        state = ClusterState(spec.name, str(self.directory))
        secrets = None
        if spec.security.enabled:
            secrets = ClusterSecrets.make(self.directory / "security", spec.security)
            state.security = secrets.client_settings()
        state.save()
        try:
            self._start_zookeeper(state, timeout_s, spec.zookeeper_heap)
            names = [r.name for r in spec.regions]
            for region in spec.regions:
                peers = [name for name in names if name != region.name] if spec.linked else None
                self._start_region(state, region, timeout_s, peers=peers, secrets=secrets)
            if spec.linked:
                self._start_links(state, timeout_s, tls=spec.security.tls)
        except BaseException:
            self._say("start failed: stopping what was started")
            self.down(state)
            raise
        return state

    def _start_zookeeper(self, state: ClusterState, timeout_s: float, heap: str) -> None:
        self._say("zookeeper: starting")
        server = ZooKeeperServer(self.directory / "zookeeper", detached=True, heap=heap)
        server.start(timeout_s)
        assert server.pid is not None
        state.zookeeper = server.address
        state.configuration_store = server.url(CONFIGURATION_CHROOT)
        state.processes.append(
            ProcessRecord("zookeeper", "zookeeper", "", server.pid, str(server.log_path), server.address)
        )
        state.save()

    def _start_region(
        self,
        state: ClusterState,
        region: RegionSpec,
        timeout_s: float,
        *,
        peers: list[str] | None = None,
        secrets: ClusterSecrets | None = None,
    ) -> None:
        """``peers``: the other regions, when cross-region traffic goes through link proxies;
        ``secrets``: a secured cluster's."""
        tls = secrets is not None and secrets.spec.tls
        metadata = f"zk://{state.zookeeper}/{region.name}"
        state.regions[region.name] = {"metadata_store": metadata}
        for index in range(region.bookies):
            name = f"{region.name}-bookie-{index}"
            root = self.directory / name
            settings = {
                "prometheus_stats_http_port": 0,
                "rack": f"/{region.name}/rack-{index % 2}",
                **region.bookie_settings,
            }
            command = [
                "bookie", "--port", "0",
                "--journal-dir", str(root / "journal"), "--ledger-dir", str(root / "ledgers"),
                "--metadata-service-uri", metadata,
                *[arg for key, value in settings.items() for arg in ("--set", f"{key}={json.dumps(value)}")],
            ]  # fmt: skip
            self._start(state, name, "bookie", region.name, command, "bookie ready", timeout_s)
        for index in range(region.brokers):
            name = f"{region.name}-broker-{index}"
            settings = (
                links.broker_settings(state.regions, region.name, peers, tls=tls) if peers is not None else {}
            )
            record = self._start_broker(state, region, metadata, name, settings, timeout_s, secrets)
            service_url = record.endpoints.get("service_url", "")
            if service_url and "service_url" not in state.regions[region.name]:
                for key in ("service_url", "web_service_url", "service_url_tls", "web_service_url_tls"):
                    if record.endpoints.get(key):
                        state.regions[region.name][key] = record.endpoints[key]
        for index in range(region.read_only_brokers):
            name = f"{region.name}-read-only-broker-{index}"
            settings = {"read_only_broker": True}
            record = self._start_broker(state, region, metadata, name, settings, timeout_s, secrets)
            if "read_only_service_url" not in state.regions[region.name]:
                state.regions[region.name]["read_only_service_url"] = record.endpoints.get("service_url", "")
        state.save()

    def _start_links(self, state: ClusterState, timeout_s: float, *, tls: bool = False) -> None:
        """A link proxy in front of every writable broker for each other region, and a front
        door per region; with ``tls`` the same again for the brokers' TLS ports."""
        for region in state.regions:
            brokers = [b for b in state.find("broker", region) if b.name.startswith(f"{region}-broker-")]
            if not brokers:
                continue  # a storage-only region: nothing to reach it through
            self._start_region_links(state, region, brokers, timeout_s, tls=False)
            if tls:
                self._start_region_links(state, region, brokers, timeout_s, tls=True)

    def _start_region_links(
        self, state: ClusterState, region: str, brokers: list[ProcessRecord], timeout_s: float, *, tls: bool
    ) -> None:
        key, scheme, kind = (
            ("service_url_tls", "pulsar+ssl://", "-tls") if tls else ("service_url", "pulsar://", "")
        )
        targets = [b.endpoints[key].removeprefix(scheme) for b in brokers]
        for broker, target in zip(brokers, targets, strict=True):
            config = self.directory / f"{broker.name}.yaml"
            for peer, listen in links.listener_addresses(config, tls=tls).items():
                arguments = links.proxy_arguments(listen, [target])
                record = self._start(state, f"{broker.name}-link{kind}-from-{peer}", links.ROLE, region,
                                     arguments, "link proxy ready", timeout_s)  # fmt: skip
                record.peer = peer
                state.save()
        arguments = links.proxy_arguments(links.front_door(state.regions, region, tls=tls), targets)
        self._start(
            state, f"{region}-front-door{kind}", links.ROLE, region, arguments, "link proxy ready", timeout_s
        )

    def _start_broker(
        self,
        state: ClusterState,
        region: RegionSpec,
        metadata: str,
        name: str,
        settings: dict[str, Any],
        timeout_s: float,
        secrets: ClusterSecrets | None = None,
    ) -> ProcessRecord:
        config = self.directory / f"{name}.yaml"
        secured = secrets.broker_settings(name) if secrets is not None else {}
        config.write_text(yaml.safe_dump({**broker_config(state, region, metadata, secured), **settings}))
        arguments = ["broker", "--config", str(config)]
        return self._start(state, name, "broker", region.name, arguments, "broker ready", timeout_s)

    def _start(
        self,
        state: ClusterState,
        name: str,
        role: str,
        region: str,
        arguments: list[str],
        ready_prefix: str,
        timeout_s: float,
    ) -> ProcessRecord:
        self._say(f"{name}: starting")
        log_path = self.directory / f"{name}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "magnetar", *arguments],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        record = ProcessRecord(name, role, region, process.pid, str(log_path), arguments=arguments)
        state.processes.append(record)
        state.save()
        self._await_ready(state, record, process, ready_prefix, timeout_s)
        return record

    def _await_ready(
        self,
        state: ClusterState,
        record: ProcessRecord,
        process: subprocess.Popen[bytes],
        ready_prefix: str,
        timeout_s: float,
        after: int = 0,
    ) -> None:
        line = wait_for_line(Path(record.log), ready_prefix, process, timeout_s, after)
        record.endpoints = _endpoints(line[len(ready_prefix) :])
        record.address = record.endpoints.pop("address", "")
        state.save()

    def restart(self, name: str, *, timeout_s: float = 60.0) -> ProcessRecord:
        """Start a stopped (or killed) bookie or broker again, on its directories and port."""
        state = ClusterState.load(self.directory)
        record = next((p for p in state.processes if p.name == name), None)
        if record is None or record.role == "zookeeper":
            raise LocalClusterError(f"no bookie or broker named {name!r} in {self.directory}")
        if alive(record.pid) and _belongs(record):
            raise LocalClusterError(f"{name} is still running (pid {record.pid})")
        arguments = list(record.arguments)
        if record.role == "bookie" and "--port" in arguments:
            # The same port keeps the same bookie id, so its ledgers find it again.
            arguments[arguments.index("--port") + 1] = record.address.rsplit(":", 1)[1]
        log_path = Path(record.log)
        offset = log_end(log_path)
        self._say(f"{name}: restarting")
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                record.command or [sys.executable, "-m", "magnetar", *arguments],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        record.pid = process.pid
        state.save()
        if record.command:
            # a foreign process keeps the endpoints it was recorded with; its ready line is its own
            wait_for_line(log_path, record.ready_text, process, timeout_s, offset, anywhere=True)
            return record
        prefix = "bookie ready" if record.role == "bookie" else "broker ready"
        self._await_ready(state, record, process, prefix, timeout_s, after=offset)
        return record

    # -- down and status ------------------------------------------------------------------------
    def down(self, state: ClusterState | None = None, *, timeout_s: float = 20.0) -> list[str]:
        """Stop every recorded process (brokers, then bookies, then ZooKeeper); returns names."""
        state = state or ClusterState.load(self.directory)
        order = {links.ROLE: 0, "broker": 1, "bookie": 2, "zookeeper": 3}
        stopped = []
        for record in sorted(state.processes, key=lambda p: order.get(p.role, 9)):
            if alive(record.pid) and _belongs(record):
                self._say(f"{record.name}: stopping")
                _terminate(record.pid, timeout_s)
                stopped.append(record.name)
        return stopped

    def status(self) -> list[tuple[ProcessRecord, bool]]:
        state = ClusterState.load(self.directory)
        return [(record, alive(record.pid) and _belongs(record)) for record in state.processes]


def broker_config(
    state: ClusterState, region: RegionSpec, metadata: str, secured: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A broker's configuration file (BrokerConfig names, Pulsar's in snake_case); ``secured``:
    the security settings, which the region's own ``broker_settings`` may override."""
    return {
        "cluster_name": region.name,
        "metadata_store_url": metadata,
        "configuration_metadata_store_url": state.configuration_store,
        "advertised_address": "127.0.0.1",
        "broker_service_port": free_port(),
        "web_service_port": free_port(),
        "managed_ledger_default_ensemble_size": region.ledger.ensemble_size,
        "managed_ledger_default_write_quorum": region.ledger.write_quorum,
        "managed_ledger_default_ack_quorum": region.ledger.ack_quorum,
        **(secured or {}),
        **region.broker_settings,
    }


def _endpoints(text: str) -> dict[str, str]:
    """``127.0.0.1:3181 id=x metrics=...`` or ``service_url=pulsar://...`` -> a dict
    (a leading bare word is the address)."""
    found: dict[str, str] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep:
            found[key] = value
        elif "address" not in found:
            found["address"] = token
    return found


def log_end(log: Path) -> int:
    """Where the next line written to ``log`` will start (``after`` for wait_for_line)."""
    return log.stat().st_size if log.exists() else 0


def wait_for_line(
    log: Path,
    prefix: str,
    process: subprocess.Popen[bytes] | None,
    timeout_s: float,
    after: int = 0,
    *,
    anywhere: bool = False,
) -> str:
    """The first line starting with ``prefix`` (or holding it, ``anywhere``) written to ``log``
    past byte ``after``; ``process``, when this one started it, fails the wait if it exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            with open(log, "rb") as file:
                file.seek(after)
                text = file.read().decode(errors="replace")
            for line in text.splitlines():
                if line.startswith(prefix) or (anywhere and prefix in line):
                    return line
        if process is not None and process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise LocalClusterError(
                f"{log.stem} exited with {process.returncode} before it was ready:\n{tail}"
            )
        time.sleep(0.1)
    raise LocalClusterError(f"{log.stem} not ready after {timeout_s:.0f}s (log {log})")


def _terminate(pid: int, timeout_s: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        _reap(pid)
        time.sleep(0.05)
    if alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while alive(pid):
            _reap(pid)
            time.sleep(0.05)
    _reap(pid)


def _reap(pid: int) -> None:
    """Collect the exit status if ``pid`` is our child (when `up` ran in this process)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
