"""A synthetic run whose answers are known exactly: the post-mortem must find exactly those."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.spark.conftest import Analysed
from tests.spark.scenarios import KILL, UNLOAD


def table(analysed: Analysed, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(analysed.result.out / f"{name}.parquet").to_pylist()
    return rows


def test_windows_are_exactly_the_stalls_with_their_faults(golden: Analysed) -> None:
    found = sorted(
        (w["kind"], w["client"], w["start"], w["end"], w["fault"], w["open"])
        for w in table(golden, "windows")
    )
    expected = sorted((w.kind, w.client, w.start, w.end, w.fault, False) for w in golden.expected.windows)
    assert found == expected
    # the consumer stall comes after the kill's activity ended: it goes to the fault preceding it
    assert {w["fault"] for w in table(golden, "windows") if w["kind"] == "consumer"} == {KILL}
    assert golden.result.summary["windows"]["unattributed"] == 2  # audit's producer and topic, at the start


def test_duplicates_split_into_same_region_and_cross_region(golden: Analysed) -> None:
    rows = table(golden, "duplicates")
    assert Counter((r["subscription"], r["kind"]) for r in rows) == golden.expected.duplicates
    assert {(r["subscription"], r["uid"], r["kind"]) for r in rows} == golden.expected.duplicate_uids
    head = golden.result.summary["headline"]
    assert (head["duplicates_same_region"], head["duplicates_cross_region"]) == (2, 3)
    # a broker kill and a failover: every repeat's acknowledgement was still in flight, none lost
    assert not [r["uid"] for r in rows if r["after_ack"]]
    assert head["redeliveries_after_ack"] == 0


def test_losses_count_only_subscriptions_that_ran_to_the_end(golden: Analysed) -> None:
    found = {(r["subscription"], r["uid"]) for r in table(golden, "losses")}
    assert found == golden.expected.losses == {("sub-a", "p-orders:500"), ("sub-a", "p-orders:501")}
    # sub-b stopped after message 200: its missing 150 and everything after are not losses
    assert golden.result.summary["losses"]["examples"] == ["p-orders:500", "p-orders:501"]


def test_reorders_per_producer_and_per_key(golden: Analysed) -> None:
    rows = table(golden, "reorders")
    for scope in ("producer", "key"):
        assert {r["uid"] for r in rows if r["scope"] == scope} == golden.expected.reorders[scope]
    # duplicates (the failover repeats of 396..398) are not reorders
    assert not {r["uid"] for r in rows} & {"p-orders:396", "p-orders:397", "p-orders:398"}


def test_max_unavailability_per_fault(golden: Analysed) -> None:
    by_fault = {f["name"]: f for f in golden.result.summary["faults"]}
    assert by_fault[UNLOAD]["max_unavailability_ms"] == pytest.approx(golden.expected.max_gap_ms[UNLOAD])
    assert by_fault[UNLOAD]["windows"]["count"] == 2
    assert by_fault[KILL]["windows"]["count"] == 1
    # the workload's own start and stop are not faults
    assert list(by_fault) == [UNLOAD, KILL]


def test_latency_is_worse_during_the_unload(golden: Analysed) -> None:
    rows = {(r["fault"], r["phase"], r["measure"]): r for r in golden.result.summary["latency"]}
    before, during = rows[(UNLOAD, "before", "publish")], rows[(UNLOAD, "during", "publish")]
    assert before["p50_ms"] == pytest.approx(2.0)
    # sends held for up to ~290 ms by the stall
    assert during["max_ms"] > 250 > before["max_ms"]
    assert {r["phase"] for r in golden.result.summary["latency"]} == {"before", "during", "after"}


def test_throughput_counts_every_acknowledged_send_and_receipt(golden: Analysed) -> None:
    rows = table(golden, "throughput")
    published = sum(r["published"] for r in rows if r["topic"].endswith("/orders"))
    # c-a: 998 kept + 2 redelivered + 3 failover repeats; c-b: 201 kept - 1 lost; c-c on audit
    received = sum(r["received"] for r in rows if r["topic"].endswith("/orders"))
    assert (published, received) == (1000, 998 + 2 + 3 + 200)


def test_summary_is_versioned_with_stable_headline(golden: Analysed) -> None:
    on_disk = json.loads((golden.result.out / "summary.json").read_text())
    assert on_disk["schema"] == "magnetar.postmortem/v1"
    assert list(on_disk["headline"]) == sorted(
        [
            "events", "faults", "windows", "window_p50_ms", "window_p99_ms", "window_max_ms",
            "max_unavailability_ms", "duplicates_same_region", "duplicates_cross_region",
            "redeliveries_after_ack", "losses", "reorders_producer", "reorders_key", "reorders_partition",
            "bad_lines",
            "checker_lost_write", "checker_duplicate", "checker_poll_skip", "checker_nonmonotonic_poll",
            "checker_inconsistent_offsets",
        ]
    )  # fmt: skip
    assert on_disk["headline"]["events"] == golden.expected.events
    assert on_disk["headline"]["windows"] == len(golden.expected.windows)


def test_report_stands_alone_and_names_what_went_wrong(golden: Analysed) -> None:
    html = golden.result.report.read_text()
    assert html.count('src="data:image/png;base64,') >= 3  # two topic timelines and the latency chart
    for outside in ('src="http', "<link", "<script"):
        assert outside not in html
    for text in ("p-orders:500", "p-orders:501", UNLOAD, KILL, "cross-region"):
        assert text in html
