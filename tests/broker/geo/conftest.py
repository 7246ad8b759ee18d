"""Two regions (``east`` and ``west``) as real processes started by ``magnetar local``'s
supervisor: one ZooKeeper holding both local stores (chroots ``/east``, ``/west``) and the
shared configuration store (``/configuration``), one bookie and one broker per region. Against a
secured cluster (``security`` in its spec) the admin calls and clients carry the super-user's
token the supervisor made."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from magnetar.admin.cli import AdminClient
from magnetar.common.authentication.client import ClientCredentials
from magnetar.local import secured_cluster
from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.local.supervisor import ClusterState, ProcessRecord, Supervisor

#: the client's own (C++) logger: a Python logger can abort the process at exit
#: (apache/pulsar-client-python#256)
_CLIENT_LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)

REGIONS = ("east", "west")


class Regions:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.supervisor = Supervisor(directory)

    @property
    def state(self) -> ClusterState:
        return ClusterState.load(self.directory)

    def broker(self, region: str) -> ProcessRecord:
        return self.state.find("broker", region)[0]

    def service_url(self, region: str) -> str:
        return self.broker(region).endpoints["service_url"]

    @property
    def credentials(self) -> ClientCredentials:
        """The super-user's of a secured cluster; none for an open one."""
        return secured_cluster.credentials(self.state.security)

    def admin(self, region: str) -> AdminClient:
        return AdminClient(self.broker(region).endpoints["web_service_url"], credentials=self.credentials)

    def call(self, region: str, method: str, path: str, body: Any = None) -> Any:
        return self.admin(region).call(method, path, body)

    def client(self, region: str) -> pulsar.Client:
        token = self.credentials.data.decode()
        authentication = pulsar.AuthenticationToken(token) if token else None
        return pulsar.Client(
            self.service_url(region),
            authentication=authentication,
            operation_timeout_seconds=30,
            logger=_CLIENT_LOG,
        )

    def replicated_namespace(self, namespace: str, clusters: tuple[str, ...] = REGIONS) -> str:
        tenant = namespace.split("/")[0]
        if tenant not in self.call(clusters[0], "GET", "/admin/v2/tenants"):
            self.call(clusters[0], "PUT", f"/admin/v2/tenants/{tenant}", {"allowedClusters": list(REGIONS)})
        self.call(
            clusters[0], "PUT", f"/admin/v2/namespaces/{namespace}", {"replication_clusters": list(clusters)}
        )
        return namespace

    def stats(self, region: str, topic: str) -> Any:
        return self.call(region, "GET", f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/stats")


def region_spec(name: str, **broker_settings: Any) -> RegionSpec:
    return RegionSpec(
        name=name,
        bookies=1,
        brokers=1,
        ledger=LedgerSpec(ensemble_size=1, write_quorum=1, ack_quorum=1),
        broker_settings={
            "replication_policy_check_interval_seconds": 0.5,
            # a killed broker's bundles are free again soon
            "metadata_store_session_timeout_millis": 4000,
            **broker_settings,
        },
    )


@pytest.fixture(scope="module")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Regions]:
    """Both regions, shared by the tests of a module (each test uses its own namespace)."""
    started = Regions(tmp_path_factory.mktemp("geo") / "cluster")
    started.supervisor.up(ClusterSpec(name="geo", regions=[region_spec(r) for r in REGIONS]))
    yield started
    started.supervisor.down()


@pytest.fixture(scope="module")
def three_regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Regions]:
    """east, west and south (PIP-33's two-round case)."""
    started = Regions(tmp_path_factory.mktemp("geo3") / "cluster")
    # Snapshots never time out here: one that completes after a region was removed shows (b).
    specs = [
        region_spec(r, replicated_subscriptions_snapshot_timeout_seconds=3600) for r in (*REGIONS, "south")
    ]
    started.supervisor.up(ClusterSpec(name="geo3", regions=specs))
    yield started
    started.supervisor.down()
