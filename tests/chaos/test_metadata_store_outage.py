"""metadata-store-outage: ZooKeeper frozen for 5, 20, 40 and 60 s under 500 msg/s, on a
single broker and on three. Each run: no acknowledged message lost, no broker fences its own topic,
no traceback, publishing resumes within 1 s of ZooKeeper's return (or never stopped), no
acknowledgement is lost (nothing acknowledged is redelivered), and the post-mortem's windows and
duplicates are the ones the event log holds.

Sessions (5 s here) shorter than the outage expire when ZooKeeper comes back, so every bundle is
released and taken again; the runs of a topology share its cluster, which must be whole again
before the next (the experiment's steady state).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.local.supervisor import Supervisor
from magnetar.spark import postmortem, tables
from tests.chaos.eventlog import duplicates, events, producer_windows, redeliveries_after_ack
from tests.chaos.lab import ROOT, run

# exclusive: publishing must resume within 1 s of ZooKeeper's return, which other workers' clusters
# on the same two cores can take from it
pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.exclusive]

SINGLE_BROKER = ClusterSpec(
    name="one-broker",
    regions=[
        RegionSpec(
            name="jp-east",
            bookies=2,
            brokers=1,
            ledger=LedgerSpec(ensemble_size=2, write_quorum=2, ack_quorum=2),
            bookie_settings={"zk_timeout": 4000, "lost_bookie_recovery_delay": 5},
            broker_settings={"metadata_store_session_timeout_millis": 5000},
        )
    ],
)
#: what publishing may take to resume once ZooKeeper is back
RESUME_NS = 1_000_000_000


@pytest.fixture(scope="module", params=["single-broker", "three-brokers"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    spec = (
        SINGLE_BROKER
        if request.param == "single-broker"
        else ClusterSpec.load(ROOT / "examples" / "one-region.yaml")
    )
    directory = tmp_path_factory.mktemp(request.param) / "cluster"
    supervisor = Supervisor(directory)
    supervisor.up(spec)
    yield directory
    supervisor.down()


@pytest.mark.parametrize("seconds", [5, 20, 40, 60])
def test_metadata_store_outage(cluster: Path, seconds: int, spark: SparkSession) -> None:
    result, run_dir = run(
        "metadata-store-outage",
        cluster,
        run_id=f"metadata-store-outage-{seconds}s",
        env={"MAGNETAR_OUTAGE_SECONDS": str(seconds)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["status"] == "completed"
    assert journal["steady_states"]["after"]["steady_state_met"]
    outage = next(r for r in journal["run"] if r["activity"]["name"] == "metadata-store-outage")
    frozen_at, thawed_at = outage["output"]["frozen_at"], outage["output"]["thawed_at"]
    assert thawed_at - frozen_at >= seconds - 0.5, "ZooKeeper was frozen"

    logged = events(run_dir)
    acked = {e["uid"] for e in logged if e["event"] == "send_ok"}
    assert len(acked) > 500 * (seconds + 15) // 2
    assert acked <= {e["uid"] for e in logged if e["event"] == "receive"}, "acknowledged messages lost"
    for log in (run_dir / "cluster").glob("*broker*.log"):
        text = log.read_text()
        assert "rewritten by another broker" not in text, f"{log.name}: a broker fenced its own topic"
        assert "Traceback" not in text, log.name

    analysed = postmortem.run(run_dir, spark, html=False)
    headline = analysed.summary["headline"]
    assert headline["losses"] == 0
    assert (headline["duplicates_same_region"], headline["duplicates_cross_region"]) == duplicates(logged)
    # acknowledgements live in cursor ledgers on the bookies: the outage loses none of them
    assert headline["redeliveries_after_ack"] == redeliveries_after_ack(logged) == 0, "acknowledgements lost"
    windows = [
        (int(w["start"]), int(w["end"]))
        for w in tables.rows(analysed.out / "windows.parquet")
        if w["kind"] == "producer" and not w["open"]
    ]
    assert sorted(windows) == producer_windows(logged), "the post-mortem's producer windows"
    thawed_ns = int(thawed_at * 1e9)
    late = [(start, end) for start, end in windows if end - max(start, thawed_ns) > RESUME_NS]
    assert not late, f"publishing took over 1 s to resume after ZooKeeper's return: {late}"
