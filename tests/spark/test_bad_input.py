"""Bad input: bad lines are located and reported, not dropped; unknown versions and broken
journals are refused with the file named; the CLI's exit status tells CI what happened."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from magnetar.spark import postmortem, synthetic
from magnetar.spark.cli import postmortem as command
from magnetar.spark.errors import BadInputError
from magnetar.spark.ingest import read_events
from magnetar.spark.journal import read_faults
from magnetar.spark.location import Location
from tests.spark.scenarios import CLEAN, SMALL


def insert_lines(path: Path, at: dict[int, str]) -> None:
    """Put ``text`` at 1-based line ``n`` for each ``n: text`` (in increasing order)."""
    lines = path.read_text().splitlines()
    for number, text in sorted(at.items()):
        lines.insert(number - 1, text)
    path.write_text("\n".join(lines) + "\n")


def read(spark: SparkSession, run_dir: Path) -> tuple[int, int]:
    """(events, bad lines) as the post-mortem's reading counts them (its headline's figures), without
    the rest of a post-mortem: these tests are about reading."""
    log = read_events(spark, run_dir, Location.of(run_dir / "staged.parquet"))
    try:
        return log.valid, log.bad
    finally:
        log.release()


def test_bad_lines_are_counted_and_located(spark: SparkSession, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    expected = synthetic.write(CLEAN, run_dir)
    insert_lines(
        run_dir / "events" / "c.jsonl",
        {
            3: "{not json",
            7: '{"ts": "yesterday", "client": "c", "event": "receive"}',
            8: "",  # blank: ignored, not bad
            120: '{"ts": 1, "client": "c", "event": "explode"}',
            121: '{"ts": 1, "event": "receive"}',
        },
    )
    result = postmortem.run(run_dir, spark)
    bad = result.summary["bad_lines"]
    assert bad["count"] == result.summary["headline"]["bad_lines"] == 4
    assert [(b["file"], b["line"]) for b in bad["examples"]] == [
        ("c.jsonl", 3),
        ("c.jsonl", 7),
        ("c.jsonl", 120),
        ("c.jsonl", 121),
    ]
    reasons = [b["reason"] for b in bad["examples"]]
    assert reasons == [
        "not a JSON object of the event schema",
        "a field has the wrong type",
        "unknown event explode",
        "missing, client",
    ]
    # every good line still counts
    assert result.summary["headline"]["events"] == expected.events
    assert "c.jsonl:120" in result.report.read_text()


def test_an_unknown_major_version_is_refused_naming_the_file(spark: SparkSession, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    synthetic.write(CLEAN, run_dir)
    insert_lines(run_dir / "events" / "p.jsonl", {5: '{"v": 3, "ts": 5, "client": "p", "event": "send"}'})
    with pytest.raises(BadInputError, match=r"p\.jsonl: event schema version 3 is not supported"):
        postmortem.run(run_dir, spark)


def test_version_1_and_version_2_lines_are_read_side_by_side(spark: SparkSession, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    expected = synthetic.write(CLEAN, run_dir)
    insert_lines(
        run_dir / "events" / "p.jsonl",
        {5: '{"v": 2, "ts": 5, "client": "p", "event": "seek", "sub_type": "Exclusive", "redelivery": 0}'},
    )
    assert read(spark, run_dir) == (expected.events + 1, 0)


def test_a_minor_version_of_our_major_is_read(spark: SparkSession, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    expected = synthetic.write(CLEAN, run_dir)
    insert_lines(
        run_dir / "events" / "p.jsonl", {5: '{"v": "1.3", "ts": 5, "client": "p", "event": "connect"}'}
    )
    assert read(spark, run_dir) == (expected.events + 1, 0)


@pytest.mark.parametrize(
    ("journal", "message"),
    [
        ("{ not json", "not readable as JSON"),
        ('["a list"]', "not a Chaos Toolkit journal"),
        ('{"run": [{"name": "x"}]}', r"run\[0\]: an activity run needs an 'activity' object"),
        ('{"run": [{"activity": {"type": "action", "name": "x"}, "start": "noon"}]}', "not an ISO 8601 time"),
    ],
)
def test_a_broken_journal_is_refused(tmp_path: Path, journal: str, message: str) -> None:
    (tmp_path / "journal.json").write_text(journal)
    with pytest.raises(BadInputError, match=message):
        read_faults(tmp_path)


def test_journal_faults_leave_out_the_workload_and_name_repeats(tmp_path: Path) -> None:
    def entry(name: str, module: str, start: str, kind: str = "action") -> dict[str, object]:
        activity = {"type": kind, "name": name, "provider": {"type": "python", "module": module}}
        return {"activity": activity, "start": start, "end": start, "status": "succeeded"}

    journal = {
        "run": [
            entry("start-workload", "magnetar.chaos.workload.actions", "2026-11-22T10:00:00+00:00"),
            entry("kill-broker", "magnetar.chaos.process.actions", "2026-11-22T10:00:05.250000+00:00"),
            entry("broker-down", "magnetar.chaos.process.probes", "2026-11-22T10:00:06+00:00", "probe"),
            entry("kill-broker", "magnetar.chaos.process.actions", "2026-11-22T10:00:09Z"),
        ],
        "rollbacks": [entry("start-broker", "magnetar.chaos.process.actions", "2026-11-22T10:00:20")],
    }
    (tmp_path / "journal.json").write_text(json.dumps(journal))
    faults = read_faults(tmp_path)
    assert faults is not None
    assert [(f.name, f.phase) for f in faults] == [
        ("kill-broker", "method"),
        ("kill-broker#2", "method"),
        ("start-broker", "rollback"),
    ]
    assert faults[0].start_ns == 1795341605_250000000  # 2026-11-22T10:00:05.25Z


def test_cli_exits_2_on_a_missing_run_directory(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, [str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert "nowhere: no such run directory" in result.output


def test_cli_exits_3_and_lists_the_lost_uids(spark: SparkSession, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    synthetic.write(SMALL, run_dir)
    result = CliRunner().invoke(command, [str(run_dir), "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    assert "1 acknowledged messages were never received" in result.output
    assert "p:250" in result.output
    assert (tmp_path / "out" / "report.html").exists()
    # the test's session was borrowed, not stopped
    assert spark.range(3).count() == 3


def test_cli_analyses_several_runs_in_one_session_and_exits_3_if_any_lost(
    spark: SparkSession, tmp_path: Path
) -> None:
    lossy, clean = tmp_path / "lossy", tmp_path / "clean"
    synthetic.write(SMALL, lossy)
    synthetic.write(CLEAN, clean)
    result = CliRunner().invoke(command, [str(clean), str(lossy)])
    assert result.exit_code == 3, result.output
    summaries = {run: json.loads((run / "report" / "summary.json").read_text()) for run in (clean, lossy)}
    assert (summaries[clean]["headline"]["losses"], summaries[lossy]["headline"]["losses"]) == (0, 1)
    assert "1 acknowledged messages were never received" in result.output
    assert result.output.count("report: ") == 2


def test_cli_refuses_out_with_several_runs_before_starting_spark(tmp_path: Path) -> None:
    runs = [str(tmp_path / "a"), str(tmp_path / "b")]
    result = CliRunner().invoke(command, [*runs, "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "--out and --compare take one RUN_DIR" in result.output


def test_the_cli_module_loads_without_pyspark_or_pyarrow() -> None:
    """`magnetar --help` lists every command, so the image (which has no Spark extra) imports this
    module: Spark and pyarrow load only when a post-mortem runs."""
    code = (
        "import sys, magnetar.spark.cli; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'pyarrow'}))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_cli_help_has_examples() -> None:
    result = CliRunner().invoke(command, ["--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output
    assert "--compare" in result.output
