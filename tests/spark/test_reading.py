"""Reading a big log as clean first: the same events as reading it line by line, and any line that
is not an event (or that Spark's JSON reader would read otherwise) sends the log back to the
line-by-line reading, which locates it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from magnetar.spark import synthetic
from magnetar.spark.errors import BadInputError
from magnetar.spark.ingest import EventLog, read_events
from magnetar.spark.location import Location
from tests.spark.scenarios import CHECKED, GOLDEN
from tests.spark.test_bad_input import insert_lines

#: clean_first: read as clean first whatever the log's size, or never
CLEAN_FIRST, LINE_BY_LINE = 0, 1 << 62


def read(spark: SparkSession, run_dir: Path, clean_first: int) -> tuple[EventLog, dict[str, Any]]:
    """The log as ``read_events`` reads it, and what it read: counts, events and bad lines."""
    log = read_events(spark, run_dir, Location.of(run_dir / f"staged-{clean_first}"), clean_first=clean_first)
    try:
        found = {
            "counts": (log.lines, log.bad, log.valid, log.files, log.last_ts),
            "schema": log.events.schema,
            "events": sorted(tuple(row) for row in log.events.collect()),
            "bad_lines": [tuple(row) for row in log.bad_lines.collect()],
            "bad_lines_schema": log.bad_lines.schema,
        }
    finally:
        log.release()
    return log, found


@pytest.mark.parametrize("scenario", [GOLDEN, CHECKED], ids=["version 1", "version 2"])
def test_a_clean_log_is_read_as_clean_into_the_same_events(
    spark: SparkSession, tmp_path: Path, scenario: synthetic.Scenario
) -> None:
    run_dir = tmp_path / "run"
    expected = synthetic.write(scenario, run_dir)
    fast, as_clean = read(spark, run_dir, CLEAN_FIRST)
    careful, line_by_line = read(spark, run_dir, LINE_BY_LINE)
    assert (fast.clean, careful.clean) == (True, False)
    assert as_clean == line_by_line
    assert fast.valid == expected.events


@pytest.mark.parametrize(
    "line",
    [
        "",  # blank: Spark's JSON reader skips it, so it reads fewer rows than there are lines
        '  {"ts": 5, "client": "p", "event": "connect"}',  # an event, not starting with "{"
        '[{"ts": 5, "client": "p", "event": "connect"}]',  # one row to Spark's JSON reader
        "{not json",
        '{"ts": "yesterday", "client": "p", "event": "send"}',
        '{"ts": 5, "client": "p", "event": "explode"}',
        '{"ts": 5, "event": "send"}',
    ],
    ids=["blank", "indented", "array", "not json", "wrong type", "unknown event", "missing"],
)
def test_a_line_that_is_not_plainly_an_event_is_read_line_by_line(
    spark: SparkSession, tmp_path: Path, line: str
) -> None:
    run_dir = tmp_path / "run"
    synthetic.write(GOLDEN, run_dir)
    insert_lines(run_dir / "events" / "p-orders.jsonl", {7: line})
    fast, as_clean = read(spark, run_dir, CLEAN_FIRST)
    _, line_by_line = read(spark, run_dir, LINE_BY_LINE)
    assert not fast.clean
    assert as_clean == line_by_line


def test_a_minor_version_of_our_major_is_still_clean(spark: SparkSession, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    synthetic.write(GOLDEN, run_dir)
    insert_lines(
        run_dir / "events" / "p-orders.jsonl", {7: '{"v": "2.1", "ts": 5, "client": "p", "event": "connect"}'}
    )
    fast, as_clean = read(spark, run_dir, CLEAN_FIRST)
    _, line_by_line = read(spark, run_dir, LINE_BY_LINE)
    assert fast.clean
    assert as_clean == line_by_line


def test_a_newer_major_version_is_refused_when_read_as_clean_first(
    spark: SparkSession, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    synthetic.write(GOLDEN, run_dir)
    insert_lines(
        run_dir / "events" / "p-orders.jsonl", {5: '{"v": 3, "ts": 5, "client": "p", "event": "send"}'}
    )
    with pytest.raises(BadInputError, match=r"p-orders\.jsonl: event schema version 3 is not supported"):
        read(spark, run_dir, CLEAN_FIRST)
    assert not (run_dir / f"staged-{CLEAN_FIRST}").exists()
