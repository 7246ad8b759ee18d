"""The post-mortem's session builds its plans without pyspark's call-site capture: every column
function and DataFrame method would otherwise cost many more round trips to the JVM (21 instead of
3 for ``F.col``; a small post-mortem's 20,000 instead of 10,000) and a walk of the Python stack."""

from __future__ import annotations

import py4j.clientserver  # type: ignore[import-untyped]
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The commands the driver sends the JVM from now on (their first line: c for a call, r for a
    lookup, ...), but for m: the release of a Java object whose Python proxy was collected, which
    Python's collector may send at any time."""
    sent: list[str] = []
    send = py4j.clientserver.ClientServerConnection.send_command

    def counted(self: py4j.clientserver.ClientServerConnection, command: str, *args: object) -> object:
        kind = command.split("\n", 1)[0]
        if kind != "m":
            sent.append(kind)
        return send(self, command, *args)

    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", counted)
    return sent


def test_a_column_costs_its_lookups_and_one_call(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    F.col("warm")
    sent = round_trips(monkeypatch)
    F.col("ts")
    monkeypatch.undo()
    # with the capture: 21 (the session looked up, the conf read, the origin set and cleared)
    assert sent.count("c") == 1, f"a column function's round trips: {sent}"
    assert len(sent) <= 3, f"a column function's round trips: {sent}"


def test_the_jit_is_chosen_by_how_many_logs_and_how_big() -> None:
    from magnetar.spark.session import MANY_SMALL_INPUTS_JVM, SMALL_INPUT_JVM, small_input_jvm

    mib = 1024 * 1024
    assert small_input_jvm(1) == SMALL_INPUT_JVM  # one post-mortem: C2 never pays
    assert small_input_jvm(4, 5 * mib) == SMALL_INPUT_JVM  # the demo's four small logs
    assert small_input_jvm(3, 24 * mib) == MANY_SMALL_INPUTS_JVM
    assert small_input_jvm(8) == MANY_SMALL_INPUTS_JVM  # sizes unknown: the tests' exclusive part
    assert "TieredStopAtLevel=1" in SMALL_INPUT_JVM
    assert "TieredStopAtLevel" not in MANY_SMALL_INPUTS_JVM
