"""Apache Pulsar beside Magnetar, on loopback, for side-by-side chaos runs (``magnetar chaos
compare``) and benchmarks (bench/, through bench/pulsar/apache_pulsar.py).

    .venv/bin/python -m magnetar.chaos.apache_pulsar.processes fetch
    .venv/bin/python -m magnetar.chaos.apache_pulsar.processes standalone --dir runs/pulsar-standalone
    .venv/bin/python -m magnetar.chaos.apache_pulsar.processes cluster --dir runs/pulsar-cluster --brokers 2
    .venv/bin/python -m magnetar.chaos.apache_pulsar.processes down --dir runs/pulsar-cluster

`fetch` copies Apache Pulsar's broker and everything it runs on from Maven Central (pom.xml beside
this module) into ~/.cache/magnetar/pulsar/<version>/lib, once. `standalone` starts
PulsarStandaloneStarter (embedded bookies, RocksDB metadata); `cluster` starts ZooKeeper (Debian's,
as Magnetar's clusters use), bookies and brokers with the ExtensibleLoadManagerImpl (the load
manager whose unload can transfer a bundle to a named broker). Both run on Java 17 with the
``--add-opens`` flags of Pulsar's ``bin/pulsar`` and ``-Xmx1g``, with ``PULSAR_GC`` (default G1) and
``PULSAR_EXTRA_OPTS`` taken from the environment as ``bin/pulsar`` takes them, and write ``state.json`` in the
format of ``magnetar local``, so the chaos lab's process actions (kill_broker, start_broker) work on
Pulsar's brokers too. Nothing of Pulsar is committed or built here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from magnetar.common.ports import free_port
from magnetar.local.supervisor import ClusterState, ProcessRecord, Supervisor
from magnetar.local.zookeeper import ZooKeeperServer

VERSION = "4.0.7"
POM = Path(__file__).with_name("pom.xml")
SETTINGS = Path(__file__).with_name("settings.xml")
CACHE = Path(os.environ.get("MAGNETAR_CACHE", Path.home() / ".cache" / "magnetar")) / "pulsar" / VERSION
LIB = CACHE / "lib"
READY_TEXT = "messaging service is ready"
EXTENSIONS = "org.apache.pulsar.broker.loadbalance.extensions"
EXTENSIBLE = {
    "loadManagerClassName": f"{EXTENSIONS}.ExtensibleLoadManagerImpl",
    "loadBalancerLoadSheddingStrategy": f"{EXTENSIONS}.scheduler.TransferShedder",
}

# bin/pulsar's flags for Java 11+: BookKeeper's fadvise and CRC, Netty's direct buffers, DNS, GC metrics
ADD_OPENS = [
    "java.base/java.io", "java.base/java.util.zip", "java.base/java.nio",
    "java.base/jdk.internal.misc", "java.base/sun.net", "java.management/sun.management",
]  # fmt: skip
# Pulsar's metadata drivers for BookKeeper, as bin/pulsar registers them
BK_DRIVERS = [
    "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
]
LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="console" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{HH:mm:ss.SSS} %-5level %c{1} - %m%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="console"/></Root>
  </Loggers>
</Configuration>
"""


class PulsarUnavailableError(RuntimeError):
    pass


def say(message: str) -> None:
    print(f"apache-pulsar: {message}", flush=True)


def fetch() -> Path:
    """The jars of Apache Pulsar's broker, fetched with Maven into the cache on first use."""
    marker = CACHE / ".complete"
    if marker.exists():
        return LIB
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise PulsarUnavailableError("Apache Pulsar needs Maven (mvn) and Java 17 on PATH")
    say(f"fetching Apache Pulsar {VERSION} from Maven Central into {LIB} (once; a few hundred MB) …")
    LIB.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mvn", "-B", "-q", "-s", str(SETTINGS), "-f", str(POM), f"-Dpulsar.version={VERSION}",
         "dependency:copy-dependencies", f"-DoutputDirectory={LIB}", "-DincludeScope=runtime"],
        check=True,
    )  # fmt: skip
    marker.write_text(VERSION)
    say(f"{len(list(LIB.glob('*.jar')))} jars in {LIB}")
    return LIB


def java(main_class: str, *args: str, workdir: Path, heap: str = "1g") -> list[str]:
    """A java command line for one of Pulsar's main classes, as bin/pulsar builds it."""
    opens = [flag for module in ADD_OPENS for flag in ("--add-opens", f"{module}=ALL-UNNAMED")]
    gc = os.environ.get("PULSAR_GC", "-XX:+UseG1GC").split()
    extra = os.environ.get("PULSAR_EXTRA_OPTS", "").split()
    return [
        "java", f"-Xmx{heap}", f"-XX:MaxDirectMemorySize={heap}", *gc, *extra,
        "-Djava.net.preferIPv4Stack=true", "-Dio.netty.tryReflectionSetAccessible=true",
        "-Djute.maxbuffer=10485760", "-Dzookeeper.snapshot.trust.empty=true",
        f"-Dlog4j.configurationFile={workdir / 'log4j2.xml'}", *BK_DRIVERS, *opens,
        "-cp", f"{LIB}/*", main_class, *args,
    ]  # fmt: skip


def write_conf(path: Path, settings: dict[str, object]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


def ledger_settings(ensemble: int, write_quorum: int, ack_quorum: int) -> dict[str, object]:
    """Broker and bookie settings both sides of a comparison share: E/Qw/Qa, fsync on, small caches."""
    return {
        "managedLedgerDefaultEnsembleSize": ensemble,
        "managedLedgerDefaultWriteQuorum": write_quorum,
        "managedLedgerDefaultAckQuorum": ack_quorum,
        "journalSyncData": "true",
        "dbStorage_writeCacheMaxSizeMb": 64,
        "dbStorage_readAheadCacheMaxSizeMb": 64,
        "dbStorage_rocksDB_blockCacheSize": 64 * 1024 * 1024,
    }


def wait_until(ready: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path,
               timeout_s: float) -> None:  # fmt: skip
    """Poll ``ready`` until it holds; the process's log tail if it exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise PulsarUnavailableError(f"{log.stem} exited with {process.returncode}:\n{tail}")
        with contextlib.suppress(OSError):
            if ready():
                return
        time.sleep(0.2)
    raise PulsarUnavailableError(f"{what} not ready after {timeout_s:.0f}s (log {log})")


def wait_http(url: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    def answers() -> bool:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)

    wait_until(answers, url, process, log, timeout_s)


def wait_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    def open_() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    wait_until(open_, f"port {port}", process, log, timeout_s)


def launch(command: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
            start_new_session=True,
        )  # fmt: skip


@dataclass
class Endpoints:
    service_url: str
    admin_url: str
    broker_pids: list[int] = field(default_factory=list)


class ApachePulsar:
    """A standalone or a small cluster of Apache Pulsar under ``directory``; ``with`` stops it."""

    def __init__(
        self,
        directory: Path,
        *,
        bookies: int = 2,
        ledger: tuple[int, int, int] = (2, 2, 2),
        bookie_settings: dict[str, object] | None = None,
        broker_settings: dict[str, object] | None = None,
    ) -> None:
        """``bookie_settings`` and ``broker_settings``: more of bookkeeper.conf and broker.conf
        (Pulsar's own names), after the launcher's."""
        self.directory = directory.resolve()
        self.bookies = bookies
        self.ledger = ledger
        self.bookie_settings = dict(bookie_settings or {})
        self.broker_settings = dict(broker_settings or {})
        self.state = ClusterState(name="apache-pulsar", directory=str(self.directory))
        self.zookeeper: ZooKeeperServer | None = None
        self.configuration_store = ""
        self.extensible = True

    def _prepare(self) -> None:
        fetch()
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "log4j2.xml").write_text(LOG4J2)

    def _record(self, name: str, role: str, pid: int, log: Path,
                command: list[str], endpoints: dict[str, str], address: str = "") -> None:  # fmt: skip
        self.state.processes.append(
            ProcessRecord(
                name=name,
                role=role,
                region=self.state.name,
                pid=pid,
                log=str(log),
                address=address,
                endpoints=endpoints,
                command=command,
                ready_text=READY_TEXT if role == "broker" else "",
            )
        )
        self.state.save()

    # -- standalone -----------------------------------------------------------------------------
    def standalone(self, timeout_s: float = 180, *, wait: bool = True) -> Endpoints:
        """PulsarStandaloneStarter: one JVM with the broker and ``bookies`` embedded bookies
        (``wait=False`` returns as soon as it is launched, for timing its start)."""
        self._prepare()
        port, web = free_port(), free_port()
        conf = write_conf(self.directory / "standalone.conf", {
            "clusterName": "standalone", "bindAddress": "127.0.0.1", "advertisedAddress": "127.0.0.1",
            "brokerServicePort": port, "webServicePort": web, "allowLoopback": "true",
            "httpServerEnabled": "false", **ledger_settings(*self.ledger),
        })  # fmt: skip
        command = java("org.apache.pulsar.PulsarStandaloneStarter", "--config", str(conf),
                       "--num-bookies", str(self.bookies), "--bookkeeper-port", str(free_port()),
                       "--no-functions-worker", "--no-stream-storage", "--wipe-data",
                       workdir=self.directory)  # fmt: skip
        log = self.directory / "standalone.log"
        say(f"starting standalone ({self.bookies} bookies) in {self.directory}")
        process = launch(command, log, self.directory)
        endpoints = {
            "service_url": f"pulsar://127.0.0.1:{port}",
            "web_service_url": f"http://127.0.0.1:{web}",
        }
        self._record(
            "apache-pulsar-standalone", "broker", process.pid, log, command, endpoints, f"127.0.0.1:{port}"
        )
        if not wait:
            return Endpoints(endpoints["service_url"], endpoints["web_service_url"], [process.pid])
        wait_http(f"http://127.0.0.1:{web}/admin/v2/namespaces/public/default", process, log, timeout_s)
        say(f"standalone ready at {endpoints['service_url']} (admin {endpoints['web_service_url']})")
        return Endpoints(endpoints["service_url"], endpoints["web_service_url"], [process.pid])

    # -- cluster --------------------------------------------------------------------------------
    def cluster(
        self,
        brokers: int = 2,
        *,
        cluster_name: str = "pulsar-bench",
        configuration_store: str | None = None,
        extensible: bool = True,
        timeout_s: float = 180,
    ) -> Endpoints:
        """ZooKeeper, bookies and ``brokers`` brokers, with the extensible load manager (or
        Pulsar's default, ``extensible=False``). ``configuration_store`` (host:port of another
        cluster's ZooKeeper) makes this cluster one region of a geo-replicated instance."""
        self._prepare()
        # the state names the cluster as Pulsar does, one region of it: the chaos lab's
        # activities that name a region (kill_bookie, transfer_bundle's broker list) find it
        self.state.name = cluster_name
        self.zookeeper = ZooKeeperServer(self.directory / "zookeeper", detached=True)
        self.zookeeper.start()
        zk = f"127.0.0.1:{self.zookeeper.port}"
        self.state.zookeeper = zk
        # BookKeeper's metadata lives under /ledgers of Pulsar's ZooKeeper
        self.state.regions[cluster_name] = {"metadata_store": f"zk://{zk}/ledgers"}
        self.configuration_store = configuration_store or zk
        self.extensible = extensible
        self._record("apache-pulsar-zookeeper", "zookeeper", self.zookeeper.pid or 0,
                     self.zookeeper.log_path, [], {})  # fmt: skip
        ports = [(free_port(), free_port()) for _ in range(brokers)]
        self.state.regions[cluster_name]["service_url"] = f"pulsar://127.0.0.1:{ports[0][0]}"
        say(f"initializing cluster metadata of {cluster_name} on ZooKeeper {zk}")
        subprocess.run(
            java("org.apache.pulsar.PulsarClusterMetadataSetup", "--cluster", cluster_name,
                 "--metadata-store", f"zk:{zk}",
                 "--configuration-metadata-store", f"zk:{self.configuration_store}",
                 "--web-service-url", f"http://127.0.0.1:{ports[0][1]}",
                 "--broker-service-url", f"pulsar://127.0.0.1:{ports[0][0]}",
                 workdir=self.directory, heap="256m"),
            check=True, stdout=(self.directory / "metadata-setup.log").open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        for index in range(self.bookies):
            self._bookie(index, zk, timeout_s)
        endpoints = [self._broker(index, zk, cluster_name, *ports[index]) for index in range(brokers)]
        for process, log, web in endpoints:
            wait_http(f"http://127.0.0.1:{web}/admin/v2/brokers/ready", process, log, timeout_s)
        say(f"cluster ready: {brokers} brokers, {self.bookies} bookies")
        return Endpoints(
            f"pulsar://127.0.0.1:{ports[0][0]}",
            f"http://127.0.0.1:{ports[0][1]}",
            [p.pid for p, _, _ in endpoints],
        )

    def _bookie(self, index: int, zk: str, timeout_s: float) -> None:
        root = self.directory / f"bookie-{index}"
        root.mkdir(parents=True, exist_ok=True)
        port = free_port()
        conf = write_conf(root / "bookkeeper.conf", {
            "bookiePort": port, "advertisedAddress": "127.0.0.1", "allowLoopback": "true",
            "journalDirectories": root / "journal", "ledgerDirectories": root / "ledgers",
            "metadataServiceUri": f"zk+hierarchical://{zk}/ledgers", "httpServerEnabled": "false",
            "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
            **ledger_settings(*self.ledger), **self.bookie_settings,
        })  # fmt: skip
        command = java(
            "org.apache.bookkeeper.server.Main", "--conf", str(conf), workdir=self.directory, heap="512m"
        )
        log = root / "bookie.log"
        process = launch(command, log, root)
        self._record(
            f"apache-pulsar-bookie-{index}", "bookie", process.pid, log, command, {}, f"127.0.0.1:{port}"
        )
        wait_port(port, process, log, timeout_s)

    def _broker(self, index: int, zk: str, cluster_name: str, port: int, web: int
                ) -> tuple[subprocess.Popen[bytes], Path, int]:  # fmt: skip
        root = self.directory / f"broker-{index}"
        root.mkdir(parents=True, exist_ok=True)
        conf = write_conf(root / "broker.conf", {
            "clusterName": cluster_name, "metadataStoreUrl": f"zk:{zk}",
            "configurationMetadataStoreUrl": f"zk:{self.configuration_store}", "bindAddress": "127.0.0.1",
            "advertisedAddress": "127.0.0.1", "brokerServicePort": port, "webServicePort": web,
            **(EXTENSIBLE if self.extensible else {}),
            # moves happen when the benchmark or the experiment says, as in Magnetar's runs
            "loadBalancerSheddingEnabled": "false", "loadBalancerAutoBundleSplitEnabled": "false",
            "metadataStoreSessionTimeoutMillis": 5000, "functionsWorkerEnabled": "false",
            **ledger_settings(*self.ledger), **self.broker_settings,
        })  # fmt: skip
        command = java(
            "org.apache.pulsar.PulsarBrokerStarter", "--broker-conf", str(conf), workdir=self.directory
        )
        log = root / "broker.log"
        process = launch(command, log, root)
        endpoints = {
            "service_url": f"pulsar://127.0.0.1:{port}",
            "web_service_url": f"http://127.0.0.1:{web}",
            "broker_id": f"127.0.0.1:{web}",
        }
        self._record(
            f"apache-pulsar-broker-{index}",
            "broker",
            process.pid,
            log,
            command,
            endpoints,
            f"127.0.0.1:{web}",
        )
        return process, log, web

    # -- down -----------------------------------------------------------------------------------
    def down(self) -> None:
        """Stop everything recorded in ``state.json`` (brokers first), then ZooKeeper."""
        if (self.directory / "state.json").exists():
            Supervisor(self.directory, on_status=say).down()
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def __enter__(self) -> ApachePulsar:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.down()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="fetch Apache Pulsar's jars into the cache")
    for name, helptext in (
        ("standalone", "start a standalone"),
        ("cluster", "start ZooKeeper, bookies, brokers"),
    ):
        sub = commands.add_parser(name, help=f"{helptext}; stays in the foreground until Ctrl-C")
        sub.add_argument("--dir", type=Path, required=True, help="working directory (logs, state.json)")
        sub.add_argument("--bookies", type=int, default=2, help="bookies (default 2, E/Qw/Qa 2/2/2)")
        if name == "cluster":
            sub.add_argument("--brokers", type=int, default=2, help="brokers (default 2)")
    down = commands.add_parser("down", help="stop what standalone or cluster started")
    down.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "fetch":
        fetch()
        return
    if args.command == "down":
        ApachePulsar(args.dir).down()
        return
    pulsar = ApachePulsar(args.dir, bookies=args.bookies)
    with pulsar:
        started = pulsar.standalone() if args.command == "standalone" else pulsar.cluster(args.brokers)
        print(json.dumps({"service_url": started.service_url, "admin_url": started.admin_url}), flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
