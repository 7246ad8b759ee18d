"""The post-mortem reads run.json through the run directory's contract, from a path or a URI; a
bad one is its BadInputError (exit status 2), naming the file and the fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from magnetar.common.run_directory import ExpectedSubscription, RunInfo, write_run_info
from magnetar.spark.errors import BadInputError
from magnetar.spark.runinfo import read_run_info


def test_what_the_lab_writes_is_read_from_a_path_and_a_uri(tmp_path: Path) -> None:
    written = RunInfo(
        id="run", clusters=["east"], subscriptions=[ExpectedSubscription(topic="t", subscription="s")]
    )
    (tmp_path / "run").mkdir()
    write_run_info(tmp_path / "run", written)
    assert read_run_info(tmp_path / "run") == written
    assert read_run_info((tmp_path / "run").as_uri()) == written


def test_without_run_json_the_id_is_the_directorys_name(tmp_path: Path) -> None:
    assert read_run_info(tmp_path) == RunInfo(id=tmp_path.name)
    assert read_run_info(tmp_path.as_uri()) == RunInfo(id=tmp_path.name)


def test_a_bad_run_json_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text('{"id": "r", "subscriptions": [{"topic": "t"}]}')
    with pytest.raises(
        BadInputError,
        match=r"run\.json: not valid run metadata: subscriptions\.0\.subscription: Field required",
    ):
        read_run_info(tmp_path)
