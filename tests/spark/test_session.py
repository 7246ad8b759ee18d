"""The post-mortem's session builds its plans without pyspark's call-site capture: every column
function and DataFrame method would otherwise cost many more round trips to the JVM (21 instead of
3 for ``F.col``; a small post-mortem's 20,000 instead of 10,000) and a walk of the Python stack."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import py4j.clientserver  # type: ignore[import-untyped]
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


@contextmanager
def round_trips() -> Iterator[list[str]]:
    """The commands the driver sends the JVM meanwhile (their first line: c for a call, r for a
    lookup, ...), but for m: the release of a Java object whose Python proxy was collected, which
    Python's collector may send at any time."""
    sent: list[str] = []
    send = py4j.clientserver.ClientServerConnection.send_command

    def counted(self: py4j.clientserver.ClientServerConnection, command: str, *args: object) -> object:
        kind = command.split("\n", 1)[0]
        if kind != "m":
            sent.append(kind)
        return send(self, command, *args)

    py4j.clientserver.ClientServerConnection.send_command = counted
    try:
        yield sent
    finally:
        py4j.clientserver.ClientServerConnection.send_command = send


def test_a_column_costs_its_lookups_and_one_call(spark: SparkSession) -> None:
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    F.col("warm")
    with round_trips() as sent:
        F.col("ts")
    # with the capture: 21 (the session looked up, the conf read, the origin set and cleared)
    assert sent.count("c") == 1, f"a column function's round trips: {sent}"
    assert len(sent) <= 3, f"a column function's round trips: {sent}"
