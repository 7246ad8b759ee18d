"""Runs and reports named by URI: the same summary as by plain path, and bad URIs
refused with the URI named and exit status 2, before any JVM starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from magnetar.spark.cli import EXIT_BAD_INPUT, EXIT_LOSS
from magnetar.spark.cli import postmortem as command
from magnetar.spark.errors import BadInputError
from magnetar.spark.location import Location
from tests.spark.conftest import Analysed


def same_run(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary without ``run_dir``, which records the run as it was named, and the time it was made."""
    return {key: value for key, value in summary.items() if key not in ("run_dir", "generated_at")}


def test_a_run_and_report_by_file_uri_give_the_plain_path_summary(
    golden: Analysed, spark: SparkSession, tmp_path: Path
) -> None:
    run_uri, out = golden.run_dir.as_uri(), tmp_path / "by uri"  # a space: %20 in the URI
    result = CliRunner().invoke(command, [run_uri, "--out", out.as_uri()])
    # the golden run has two losses: the post-mortem reports them and says so in its exit status
    assert result.exit_code == EXIT_LOSS, result.output
    by_uri = json.loads((out / "summary.json").read_text())
    assert by_uri["run_dir"] == run_uri
    assert same_run(by_uri) == same_run(json.loads((golden.run_dir / "report" / "summary.json").read_text()))
    assert (out / "report.html").exists()
    assert (out / "windows.parquet").is_dir()
    assert not (out / "_lines.parquet").exists(), "the staged log is removed"


def test_the_cli_refuses_a_missing_run_by_uri(tmp_path: Path) -> None:
    missing = (tmp_path / "nowhere").as_uri()
    result = CliRunner().invoke(command, [missing])
    assert result.exit_code == EXIT_BAD_INPUT
    assert f"{missing}: no such run directory" in result.output


def test_the_cli_refuses_a_filesystem_pyarrow_cannot_open(golden: Analysed) -> None:
    result = CliRunner().invoke(command, ["ftp://example.org/runs/a"])
    assert result.exit_code == EXIT_BAD_INPUT
    assert "ftp://example.org/runs/a: cannot open its filesystem" in result.output
    assert "Unrecognized filesystem type" in result.output  # pyarrow's own words
    # a report directory too, before Spark starts
    result = CliRunner().invoke(command, [str(golden.run_dir), "--out", "ftp://example.org/reports/a"])
    assert result.exit_code == EXIT_BAD_INPUT
    assert "ftp://example.org/reports/a: cannot open its filesystem" in result.output


def test_plain_paths_and_file_uris_name_the_same_place(tmp_path: Path) -> None:
    plain, uri = Location.of(tmp_path / "run"), Location.of((tmp_path / "run").as_uri() + "/")
    assert (plain / "events").path == (uri / "events").path == str(tmp_path / "run" / "events")
    # Spark is given file:// either way, so a cluster whose default filesystem is HDFS reads it too
    assert plain.spark == uri.spark == f"file://{tmp_path}/run"
    assert str(plain / "journal.json") == str(tmp_path / "run" / "journal.json")
    assert str(uri / "journal.json") == (tmp_path / "run").as_uri() + "/journal.json"
    assert uri.name == plain.name == "run"


def test_an_unknown_scheme_is_bad_input() -> None:
    with pytest.raises(BadInputError, match=r"^ftp://h/x: cannot open its filesystem \(pyarrow: "):
        Location.of("ftp://h/x")
