"""Storage for broker tests: an in-process metadata store and two in-process bookies; and
``local_cluster``: real ZooKeeper, bookie and broker processes started by ``magnetar local``'s
supervisor (writable brokers and, for PIP-63, read-only ones)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulsar
import pytest

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.server import BookieServer, start_bookie
from magnetar.common.metadata import MetadataStore, open_store
from magnetar.local.spec import ClusterSpec, RegionSpec
from magnetar.local.supervisor import ClusterState, ProcessRecord, Supervisor, alive
from tests.broker.e2e.conftest import Standalone

#: the client's own (C++) logger: a Python logger can abort the process at exit
#: (apache/pulsar-client-python#256)
_CLIENT_LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


@dataclass
class Storage:
    url: str
    store: MetadataStore
    client: LedgerClient
    bookies: list[BookieServer]

    async def new_client(self) -> tuple[MetadataStore, LedgerClient]:
        """Another session and client, as a second broker process would have."""
        store = await open_store(self.url)
        return store, LedgerClient(store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))


@pytest.fixture
async def storage(tmp_path: Path, memory_url: str) -> AsyncIterator[Storage]:
    bookies = []
    for index in range(2):
        root = tmp_path / f"bookie-{index}"
        config = BookieConfig(
            bookie_port=0,
            journal_directory=str(root / "journal"),
            ledger_directories=[str(root / "ledgers")],
            metadata_service_uri=memory_url,
            prometheus_stats_http_port=0,
            auto_recovery_daemon_enabled=False,
        )
        bookies.append(await start_bookie(config))
    store = await open_store(memory_url)
    client = LedgerClient(store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))
    yield Storage(memory_url, store, client, bookies)
    await client.close()
    await store.close()
    for bookie in bookies:
        await bookie.stop()


def admin_call(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    """An admin REST call that follows redirects to the owner: (status, JSON body), errors included."""
    data = None if body is None else json.dumps(body).encode()
    for _ in range(3):
        request = urllib.request.Request(
            url, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read().decode()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            if exc.code == 307:
                url = exc.headers["Location"]
                continue
            return exc.code, json.loads(exc.read().decode() or "null")
    raise AssertionError("redirect loop")


def send_until_received(
    producer: pulsar.Producer, consumer: pulsar.Consumer, data: bytes, timeout_s: float
) -> None:
    """Send ``data`` again and again until ``consumer`` gets it: on a non-persistent topic, what is
    published while the consumer is still reconnecting (after an unload or a move) reaches no one."""
    deadline = time.monotonic() + timeout_s
    while True:
        producer.send(data)
        try:
            assert consumer.receive(300).data() == data
            return
        except pulsar.Timeout:
            assert time.monotonic() < deadline, f"the consumer got nothing within {timeout_s} s"


class LocalCluster:
    """A running ``magnetar local`` cluster of one region: its processes, admin calls, clients."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.supervisor = Supervisor(directory)

    @property
    def state(self) -> ClusterState:
        return ClusterState.load(self.directory)

    def brokers(self, *, read_only: bool = False) -> list[ProcessRecord]:
        """The live writable brokers (or read-only ones), in start order."""
        return [b for b in self.state.find("broker") if alive(b.pid) and ("read-only" in b.name) == read_only]

    def service_url(self, index: int = 0, *, read_only: bool = False) -> str:
        return self.brokers(read_only=read_only)[index].endpoints["service_url"]

    def admin(
        self, method: str, path: str, body: Any = None, index: int = 0, *, read_only: bool = False
    ) -> tuple[int, Any]:
        url = self.brokers(read_only=read_only)[index].endpoints["web_service_url"] + path
        return admin_call(method, url, body)

    def client(self, service_url: str) -> pulsar.Client:
        return pulsar.Client(service_url, operation_timeout_seconds=30, logger=_CLIENT_LOG)

    def problems(self, per_process: int = 8) -> str:
        """Each process that died or logged a warning or an error: its last such lines."""
        said = []
        for record in self.state.processes:
            try:
                lines = Path(record.log).read_text(errors="replace").splitlines()
            except OSError:
                lines = []
            bad = [line for line in lines if any(word in line for word in PROBLEM_WORDS)]
            if bad or not alive(record.pid):
                state = "running" if alive(record.pid) else "NOT RUNNING"
                said.append(f"{record.name} (pid {record.pid}, {state}, log {record.log}):")
                said.extend(f"  {line[:300]}" for line in bad[-per_process:])
        return "\n".join(said) or "every process runs, and none logged a warning or an error"


#: the clusters ``local_cluster`` started and has not stopped yet
RUNNING: list[LocalCluster] = []
#: what marks a log line worth showing beside a failed test
PROBLEM_WORDS = (" WARNING ", " ERROR ", " CRITICAL ", "Traceback")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test on a local cluster shows what the cluster's processes said about it: a
    client's timeout alone does not tell which server stalled, or why."""
    report: pytest.TestReport = yield
    if report.failed and call.when == "call":
        for cluster in RUNNING:
            title = f"the processes of the cluster in {cluster.directory}"
            report.sections.append((title, cluster.problems()))
    return report


@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[RegionSpec], LocalCluster]]:
    """Start a one-region cluster from a ``RegionSpec``; everything is stopped after the tests
    of the module (a module's tests share a cluster, each on its own topics)."""
    started: list[LocalCluster] = []

    def start(region: RegionSpec) -> LocalCluster:
        cluster = LocalCluster(tmp_path_factory.mktemp("cluster"))
        started.append(cluster)
        RUNNING.append(cluster)
        cluster.supervisor.up(ClusterSpec(name="test", regions=[region]))
        return cluster

    yield start
    for cluster in started:
        RUNNING.remove(cluster)
        cluster.supervisor.down()


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Standalone]:
    """``magnetar standalone`` as a real process (tests/broker/e2e and cluster tests)."""
    server = Standalone(tmp_path / "standalone").start()
    yield server
    try:
        server.stop()
    finally:
        server.kill()
