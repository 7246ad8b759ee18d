"""The checkers, proven by mutation: a clean version-2 run (scenarios.CHECKED: one subscription of
each type) gives no finding at all; each test plants one fault in its log and every checker must
find exactly what was planted, by message id, and nothing else.

Some faults are two findings by nature, and the tests say so: a skipped message that never comes
is a poll-skip and a lost-write; two messages of a key delivered in swapped order are a poll-skip
(the first jumped over) and a nonmonotonic-poll (the late one); a step back to a message received
before is a nonmonotonic-poll and a duplicate.

The mutations are judged by the checkers alone (``postmortem.findings``: the log read as the
post-mortem reads it, then the checkers over it), all in one pass: each is planted in a copy of the
clean run on a topic of its own, its clients and subscriptions renamed with it, and the checkers
judge each topic apart, so a copy's findings are its own mutation's. The whole post-mortem runs
only where its own tables, headline or report are under test, and once on a mutation to show
that findings.parquet, the headline and the report carry exactly what the checkers found.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from magnetar.spark import postmortem, synthetic
from magnetar.spark.checkers.verdicts import NAMES
from tests.spark.scenarios import CHECKED, CHECKED_FAULT

Events = list[dict[str, Any]]
#: checker -> {(subscription, message ids)}
Found = dict[str, set[tuple[str, tuple[str, ...]]]]
MS = synthetic.MS
#: planted at or after this message, a fault is the unload's (its messages are sent from 1 s on)
LATE = 120


def uid(i: int) -> str:
    return f"p-orders:{i}"


def receipt(events: Events, client: str, i: int, event: str = "receive") -> dict[str, Any]:
    (found,) = [e for e in events if e["client"] == client and e.get("uid") == uid(i) and e["event"] == event]
    return found


def analyse(spark: SparkSession, run_dir: Path, events: Events, *, html: bool = False) -> postmortem.Result:
    """The whole post-mortem of ``events``: for what only it makes (its tables, the headline, the
    report)."""
    synthetic.write_events(CHECKED, events, run_dir)
    return postmortem.run(run_dir, spark, html=html)


def check(spark: SparkSession, run_dir: Path, events: Events) -> list[dict[str, Any]]:
    """The checkers' findings of ``events``, read as the post-mortem reads them, without the rest
    of the post-mortem."""
    synthetic.write_events(CHECKED, events, run_dir)
    return postmortem.findings(run_dir, spark)


def findings(result: postmortem.Result) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(result.out / "findings.parquet").to_pylist()
    return rows


def found(rows: list[dict[str, Any]]) -> Found:
    by_checker: Found = {name: set() for name in NAMES}
    for f in rows:
        by_checker[f["checker"]].add((f["subscription"], tuple(f["uids"])))
    return by_checker


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many findings each checker has (as the headline counts them)."""
    return {name: sum(f["checker"] == name for f in rows) for name in NAMES}


def expect(**planted: set[tuple[str, tuple[str, ...]]]) -> Found:
    """Every checker finds nothing but what ``planted`` says (keys: checker names, ``_`` for ``-``)."""
    return {name: planted.get(name.replace("-", "_"), set()) for name in NAMES}


@pytest.fixture(scope="module")
def clean() -> Events:
    events, _ = synthetic.build(CHECKED)
    return events


def test_the_clean_run_has_no_finding(spark: SparkSession, clean: Events, tmp_path: Path) -> None:
    result = analyse(spark, tmp_path / "clean", clean, html=True)
    assert found(findings(result)) == expect()
    head = result.summary["headline"]
    assert [head[f"checker_{name.replace('-', '_')}"] for name in NAMES] == [0, 0, 0, 0, 0]
    # every subscription saw everything: its unseen count drains to zero
    unseen = pq.read_table(result.out / "unseen.parquet").to_pylist()
    last = {r["subscription"]: r["unseen"] for r in sorted(unseen, key=lambda r: r["second"])}
    assert last == {"sub-ex": 0, "sub-fo": 0, "sub-ks": 0, "sub-sh": 0}
    html = result.report.read_text()
    assert "Unseen messages over time" in html
    assert "No checker found anything." in html


def drop(events: Events, client: str, i: int) -> Events:
    """``client`` never receives (nor acknowledges) message ``i``."""
    return [e for e in events if not (e["client"] == client and e.get("uid") == uid(i))]


def duplicate(events: Events, client: str, i: int) -> Events:
    """``client`` receives message ``i`` a second time, right after the first."""
    again = {**receipt(events, client, i), "ts": receipt(events, client, i)["ts"] + MS // 2}
    return [*events, again]


def swap(events: Events, client: str, i: int, j: int) -> Events:
    """``client`` receives (and acknowledges) messages ``i`` and ``j`` in each other's turn."""
    out = copy.deepcopy(events)
    for event in ("receive", "ack"):
        a, b = receipt(out, client, i, event), receipt(out, client, j, event)
        a["ts"], b["ts"] = b["ts"], a["ts"]
    return out


def back(events: Events, client: str, i: int, after: int, **fields: Any) -> Events:
    """``client`` receives message ``i`` again just after message ``after``."""
    again = {**receipt(events, client, i), "ts": receipt(events, client, after)["ts"] + MS, **fields}
    return [*events, again]


def event_of(events: Events, client: str, i: int, event: str, **fields: Any) -> dict[str, Any]:
    """An event of ``client`` (no message) 0.5 ms after its receipt of message ``i``."""
    like = receipt(events, client, i)
    kept = ("v", "run", "topic", "client", "role", "subscription", "sub_type", "cluster")
    return {**{k: like[k] for k in kept}, "ts": like["ts"] + MS // 2, "event": event, **fields}


def second_payload(events: Events, client: str, i: int) -> Events:
    out = copy.deepcopy(events)
    receipt(out, client, i)["digest"] = synthetic.digest("not " + uid(i))
    return out


def one_position_two_messages(events: Events, client: str, i: int) -> Events:
    """``client`` receives message ``i`` under the message id of message ``i + 1``."""
    out = copy.deepcopy(events)
    receipt(out, client, i)["msg_id"] = receipt(out, client, i + 1)["msg_id"]
    return out


def late_after_reconnect(events: Events, client: str, i: int, after: int) -> Events:
    """``client`` gets message ``i`` only after message ``after``, once it reconnected: it
    skipped ``i``, and the reconnection explains the step back to it."""
    out = drop(events, client, i)
    reconnect = event_of(out, client, after, "connect")
    late = {**receipt(events, client, i), "ts": reconnect["ts"] + MS // 4}
    return [*out, reconnect, late]


def one(subscription: str, *ids: int) -> set[tuple[str, tuple[str, ...]]]:
    return {(subscription, tuple(uid(i) for i in ids))}


MUTATIONS: dict[str, tuple[Callable[[Events], Events], Found]] = {
    # Shared promises no order: a missing receipt is only a loss
    "lost-write": (lambda e: drop(e, "c-sh", 130), expect(lost_write=one("sub-sh", 130))),
    "duplicate": (lambda e: duplicate(e, "c-sh", 140), expect(duplicate=one("sub-sh", 140))),
    # two messages of key k1 (133 and 137) in swapped order: 137 jumps over 133, then 133 comes late
    "swap-in-key": (
        lambda e: swap(e, "c-ks", 133, 137),
        expect(poll_skip=one("sub-ks", 133), nonmonotonic_poll=one("sub-ks", 133)),
    ),
    # an Exclusive subscription that passes 150 by: a skip, and (never made good) a loss
    "skip": (
        lambda e: drop(e, "c-ex", 150),
        expect(poll_skip=one("sub-ex", 150), lost_write=one("sub-ex", 150)),
    ),
    # the same skip made good after a reconnection: the step back is explained, the skip is not
    "skip-made-good": (
        lambda e: late_after_reconnect(e, "c-ex", 150, 155),
        expect(poll_skip=one("sub-ex", 150)),
    ),
    "second-payload": (
        lambda e: second_payload(e, "c-sh", 160),
        expect(inconsistent_offsets=one("sub-sh", 160)),
    ),
    # a position is every subscription's that received it: all four got 166 there
    "one-position-two-messages": (
        lambda e: one_position_two_messages(e, "c-sh", 165),
        expect(inconsistent_offsets=one("sub-ex,sub-fo,sub-ks,sub-sh", 165, 166)),
    ),
    # after 175, c-ex gets 170 again, with no seek, negative ack, reconnection or redelivery count
    "backwards": (
        lambda e: back(e, "c-ex", 170, 175),
        expect(nonmonotonic_poll=one("sub-ex", 170), duplicate=one("sub-ex", 170)),
    ),
}


def neighbours(events: Events) -> Events:
    """Every consumer gets two neighbours (of different keys) in each other's turn."""
    for client in ("c-ex", "c-fo", "c-ks", "c-sh"):
        events = swap(events, client, LATE, LATE + 1)
    return events


def explained(events: Events) -> Events:
    """Three steps back, each explained: a redelivery count, a seek, a negative acknowledgement."""
    events = back(events, "c-ex", 130, 135, redelivery=1)
    events = [*back(events, "c-fo", 140, 145), event_of(events, "c-fo", 145, "seek")]
    return [*back(events, "c-ks", 150, 158), event_of(events, "c-ks", 158, "nack")]


#: every log the checkers judge alone: the mutations, and the two of the tests after them
PLANTED: dict[str, Callable[[Events], Events]] = {
    **{name: mutate for name, (mutate, _) in MUTATIONS.items()},
    "neighbours": neighbours,
    "explained": explained,
}


def relabel(events: Events, copy: str) -> Events:
    """``events`` on a topic of their own: topic, clients, subscriptions and uids marked ``~copy``."""
    mark = f"~{copy}"
    out = []
    for e in events:
        e = {**e, "topic": e["topic"] + mark, "client": e["client"] + mark}
        if "subscription" in e:
            e["subscription"] += mark
        if "uid" in e:
            producer, _, seq = e["uid"].rpartition(":")
            e["uid"] = f"{producer}{mark}:{seq}"
        out.append(e)
    return out


def unlabel(row: dict[str, Any], copy: str) -> dict[str, Any]:
    """A finding of a relabelled copy, named as in the clean run."""
    mark = f"~{copy}"
    return {
        **row,
        "subscription": row["subscription"].replace(mark, ""),
        "uids": [u.replace(mark, "") for u in row["uids"]],
    }


@pytest.fixture(scope="module")
def judged(
    spark: SparkSession, clean: Events, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[dict[str, Any]]]:
    """Each planted log's findings, named as in the clean run: every copy judged in one pass."""
    events = [e for copy, mutate in PLANTED.items() for e in relabel(mutate(clean), copy)]
    rows = check(spark, tmp_path_factory.mktemp("planted"), events)
    by_copy: dict[str, list[dict[str, Any]]] = {copy: [] for copy in PLANTED}
    for row in rows:
        copy = row["topic"].rpartition("~")[2]
        assert copy in by_copy, row  # a finding on no copy's topic
        by_copy[copy].append(unlabel(row, copy))
    return by_copy


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_each_checker_finds_exactly_its_planted_fault(
    judged: dict[str, list[dict[str, Any]]], name: str
) -> None:
    _, expected = MUTATIONS[name]
    rows = judged[name]
    assert found(rows) == expected
    # every finding is dated in the unload's aftermath and attributed to it
    assert {f["fault"] for f in rows} == {CHECKED_FAULT}
    assert counts(rows) == {n: len(v) for n, v in expected.items()}


def test_a_planted_fault_reaches_the_findings_table_the_headline_and_the_report(
    spark: SparkSession, clean: Events, tmp_path: Path
) -> None:
    """The whole post-mortem of one mutation: its findings are findings.parquet's rows (exactly
    those the checkers alone find), counted in the headline, listed in the report."""
    mutate, expected = MUTATIONS["backwards"]
    events = mutate(clean)
    result = analyse(spark, tmp_path / "backwards", events, html=True)
    rows = findings(result)
    assert found(rows) == expected
    assert {f["fault"] for f in rows} == {CHECKED_FAULT}
    assert rows == check(spark, tmp_path / "backwards-checked", events)
    head = result.summary["headline"]
    assert {n: head[f"checker_{n.replace('-', '_')}"] for n in NAMES} == {
        n: len(v) for n, v in expected.items()
    }
    html = result.report.read_text()
    assert "<h2>Checkers</h2>" in html
    assert "No checker found anything." not in html
    assert uid(170) in html


def test_what_order_each_type_promises(judged: dict[str, list[dict[str, Any]]]) -> None:
    """Swapping two neighbours (different keys) breaks only the types that order by partition."""
    expected: set[tuple[str, tuple[str, ...]]] = {("sub-ex", (uid(LATE),)), ("sub-fo", (uid(LATE),))}
    assert found(judged["neighbours"]) == expect(poll_skip=expected, nonmonotonic_poll=expected)


def test_a_seek_a_negative_ack_or_a_redelivery_explains_a_step_back(
    judged: dict[str, list[dict[str, Any]]],
) -> None:
    expected = one("sub-ex", 130) | one("sub-fo", 140) | one("sub-ks", 150)
    assert found(judged["explained"]) == expect(duplicate=expected)


def test_a_loss_stays_in_the_unseen_count(spark: SparkSession, clean: Events, tmp_path: Path) -> None:
    result = analyse(spark, tmp_path / "lost", drop(drop(clean, "c-sh", 130), "c-sh", 131))
    unseen = pq.read_table(result.out / "unseen.parquet").to_pylist()
    last = {r["subscription"]: r["unseen"] for r in sorted(unseen, key=lambda r: r["second"])}
    assert last == {"sub-ex": 0, "sub-fo": 0, "sub-ks": 0, "sub-sh": 2}
    assert result.losses == 2


def test_a_message_redelivered_long_after_its_ack_counts_as_a_lost_acknowledgement(
    spark: SparkSession, clean: Events, tmp_path: Path
) -> None:
    """A repeat of a message acknowledged over a second before its consumer's last new receipt
    is a lost acknowledgement; one acknowledged just before (still in flight) is not."""
    events = back(clean, "c-sh", 60, 190)
    events = back(events, "c-ex", 185, 190)
    assert receipt(events, "c-sh", 190)["ts"] - receipt(events, "c-sh", 60, "ack")["ts"] > 1_000 * MS
    assert receipt(events, "c-ex", 190)["ts"] - receipt(events, "c-ex", 185, "ack")["ts"] < 1_000 * MS
    result = analyse(spark, tmp_path / "lost-ack", events)
    assert result.summary["headline"]["redeliveries_after_ack"] == 1
    repeats = pq.read_table(result.out / "duplicates.parquet").to_pylist()
    assert {(r["subscription"], r["uid"]) for r in repeats if r["after_ack"]} == {("sub-sh", uid(60))}
    assert {(r["subscription"], r["uid"]) for r in repeats} == {("sub-sh", uid(60)), ("sub-ex", uid(185))}
