"""The chaos lab against a secured cluster (``security: {tokens: true, tls: true}``): anonymous
clients are refused there, so the run completes only if the workload, the probes and the
actions all carry the super-user's token the supervisor recorded. bundle-unload, the cheapest
experiment, runs as in test_experiments; the post-mortem reads the run and finds no loss."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from magnetar.admin.client import AdminClient, AdminError
from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec, SecuritySpec
from magnetar.local.supervisor import ClusterState, Supervisor
from magnetar.spark import postmortem
from tests.chaos.test_experiments import completed

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

SECURED = ClusterSpec(
    name="secured-lab",
    security=SecuritySpec(tokens=True, tls=True),
    regions=[
        RegionSpec(
            name="jp-east",
            bookies=2,
            brokers=2,
            ledger=LedgerSpec(ensemble_size=2, write_quorum=2, ack_quorum=2),
            bookie_settings={"zk_timeout": 4000},
            broker_settings={"metadata_store_session_timeout_millis": 5000},
        )
    ],
)


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("secured-lab") / "cluster"
    supervisor = Supervisor(directory)
    supervisor.up(SECURED)
    yield directory
    supervisor.down()


def test_bundle_unload_on_a_secured_cluster(secured_cluster: Path, spark: SparkSession) -> None:
    state = ClusterState.load(secured_cluster)
    broker = state.find("broker")[0]
    assert broker.endpoints["service_url_tls"].startswith("pulsar+ssl://")
    with pytest.raises(AdminError) as refused:  # the lab's calls below succeed only with the token
        AdminClient(broker.endpoints["web_service_url"]).call("GET", "/admin/v2/tenants")
    assert refused.value.status == 401

    run_dir, _ = completed("bundle-unload", secured_cluster)
    workload_log = (run_dir / "workload" / "w.log").read_text()
    assert "AuthenticationError" not in workload_log
    headline = postmortem.run(run_dir, spark, html=False).summary["headline"]
    assert headline["losses"] == 0
