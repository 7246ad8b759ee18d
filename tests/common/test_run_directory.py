"""The run directory's contract (architecture §6): the chaos lab makes run directories and writes
run.json through it, the post-mortem reads them through it; a bad run.json is refused naming the
file and what is wrong."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from magnetar.common import run_directory
from magnetar.common.run_directory import (
    EVENTS,
    READABLE_VERSIONS,
    RUNS,
    SCHEMA_VERSION,
    SUBSCRIPTION_TYPES,
    ExpectedSubscription,
    Layout,
    RunDirectoryExistsError,
    RunInfo,
    RunInfoError,
    make_run_dir,
    read_run_info,
    write_run_info,
)


def test_the_event_log_names_and_version() -> None:
    # version 2 added seek and nack and the fields the checkers need; version-1 logs still read
    assert SCHEMA_VERSION == 2
    assert READABLE_VERSIONS == (1, 2)
    assert SUBSCRIPTION_TYPES == ("Exclusive", "Failover", "Shared", "KeyShared")
    assert EVENTS == (
        "send",
        "send_ok",
        "send_err",
        "receive",
        "ack",
        "connect",
        "disconnect",
        "switch_cluster",
        "seek",
        "nack",
    )
    assert Path("runs") == RUNS


def test_a_payload_digest_is_short_stable_and_tells_payloads_apart() -> None:
    digest = run_directory.payload_digest(b"w-p0:1 xxxx")
    assert digest == run_directory.payload_digest(b"w-p0:1 xxxx")
    assert re.fullmatch("[0-9a-f]{16}", digest)
    assert digest != run_directory.payload_digest(b"w-p0:2 xxxx")


def test_the_workload_writes_with_the_contracts_names() -> None:
    from magnetar.chaos.workload import events

    assert events.EVENTS is EVENTS
    assert events.SCHEMA_VERSION is SCHEMA_VERSION


def test_the_layout_names_every_part_of_a_run(tmp_path: Path) -> None:
    names = {
        Layout.EVENTS, Layout.WORKLOAD, Layout.CONTROL, Layout.CLUSTER, Layout.REPORT, Layout.KUBE_TARGET,
        Layout.EXPERIMENT, Layout.JOURNAL, Layout.CHAOS_SUMMARY, Layout.RUN_INFO,
    }  # fmt: skip
    assert names == {
        "events", "workload", "control", "cluster", "report", "kube-target",
        "experiment.json", "journal.json", "chaos-summary.json", "run.json",
    }  # fmt: skip
    assert Layout.event_log(tmp_path, "w-p0") == tmp_path / "events" / "w-p0.jsonl"
    assert Layout.control(tmp_path, "w-c0") == tmp_path / "control" / "w-c0.json"
    assert Layout.workload(tmp_path, "w", ".pid") == tmp_path / "workload" / "w.pid"


def test_making_a_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "r-1"
    assert make_run_dir(run_dir, new=True) == run_dir
    assert (run_dir / "events").is_dir()
    # every activity of one run asks for it again: it is used as it is
    (run_dir / "events" / "w-p0.jsonl").write_text("{}\n")
    assert make_run_dir(run_dir) == run_dir
    assert (run_dir / "events" / "w-p0.jsonl").read_text() == "{}\n"


def test_a_new_run_never_takes_another_runs_directory(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path / "r-1", new=True)
    with pytest.raises(
        RunDirectoryExistsError, match=rf"run directory {re.escape(str(run_dir))} exists already"
    ):
        make_run_dir(run_dir, new=True)
    assert issubclass(RunDirectoryExistsError, FileExistsError)


def test_run_json_round_trip(tmp_path: Path) -> None:
    info = RunInfo(
        id="r-1",
        clusters=["jp-east", "jp-west"],
        subscriptions=[
            ExpectedSubscription(topic="persistent://geo/outage/orders", subscription="orders-e"),
            ExpectedSubscription(topic="persistent://geo/outage/orders", subscription="orders-w"),
        ],
    )
    path = write_run_info(tmp_path, info)
    assert path == tmp_path / "run.json"
    assert json.loads(path.read_text()) == {
        "id": "r-1",
        "clusters": ["jp-east", "jp-west"],
        "subscriptions": [
            {"topic": "persistent://geo/outage/orders", "subscription": "orders-e"},
            {"topic": "persistent://geo/outage/orders", "subscription": "orders-w"},
        ],
    }
    assert read_run_info(tmp_path) == info
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"], "no partial file left behind"


def test_without_run_json_the_id_is_the_directorys_name(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path / "bundle-unload-20260101T000000Z")
    assert read_run_info(run_dir) == RunInfo(id="bundle-unload-20260101T000000Z")


def test_keys_a_reader_does_not_know_are_kept(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text('{"id": "r", "operator": "someone"}')
    info = read_run_info(tmp_path)
    assert (info.id, info.clusters, info.subscriptions) == ("r", [], [])
    assert info.model_extra == {"operator": "someone"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", r"not valid run metadata: not JSON \("),
        ('["r-1"]', "not valid run metadata: a JSON object is needed, not list"),
        ('{"clusters": []}', "not valid run metadata: id: Field required"),
        ('{"id": ""}', "not valid run metadata: id: String should have at least 1 character"),
        (
            '{"id": "r", "clusters": "jp-east"}',
            "not valid run metadata: clusters: Input should be a valid list",
        ),
        (
            '{"id": "r", "subscriptions": [{"topic": "t"}]}',
            r"not valid run metadata: subscriptions\.0\.subscription: Field required",
        ),
        (
            '{"id": "r", "subscriptions": [{"topic": "t", "subscription": "s", "from": 0}]}',
            r"not valid run metadata: subscriptions\.0\.from: Extra inputs are not permitted",
        ),
        (
            '{"id": 7, "subscriptions": "all"}',
            "not valid run metadata: id: Input should be a valid string; subscriptions: Input should be",
        ),
    ],
)
def test_a_malformed_run_json_is_refused_naming_the_file_and_the_fault(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(RunInfoError, match=rf"^{re.escape(str(tmp_path / 'run.json'))}: {message}"):
        read_run_info(tmp_path)


def test_an_unreadable_run_json_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_bytes(b'{"id": "\xff"}')
    with pytest.raises(RunInfoError, match=rf"^{re.escape(str(tmp_path / 'run.json'))}: not readable"):
        read_run_info(tmp_path)


def test_the_contract_imports_neither_side() -> None:
    source = Path(run_directory.__file__).read_text()
    assert "import magnetar" not in source
    assert "from magnetar" not in source
