"""Reading a run: events (with every bad line counted and located) and the fault journal."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from magnetar.spark.schema import EVENT_SCHEMA, EVENTS, SCHEMA_VERSION


class BadInputError(Exception):
    """The run cannot be analysed (missing files, unreadable journal, unknown schema version)."""


@dataclass(frozen=True)
class Fault:
    name: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class BadLine:
    file: str
    line: int
    reason: str


def read_events(spark: SparkSession, run_dir: Path) -> tuple[DataFrame, list[BadLine]]:
    """Valid events, and the bad lines (file, line number, why) that were left out."""
    files = sorted((run_dir / "events").glob("*.jsonl"))
    if not files:
        raise BadInputError(f"{run_dir / 'events'} holds no *.jsonl event logs")
    raw = spark.read.text([str(f) for f in files]).withColumn("file", F.input_file_name())
    parsed = raw.withColumn("e", F.from_json("value", EVENT_SCHEMA, {"mode": "PERMISSIVE"}))
    valid_event = F.col("e.event").isin(*EVENTS)
    good = (
        F.col("e").isNotNull()
        & F.col("e.ts").isNotNull()
        & F.col("e.client").isNotNull()
        & valid_event
        & (F.trim(F.col("value")) != "")
    )
    versions = parsed.where(F.col("e.v").isNotNull() & (F.col("e.v") != SCHEMA_VERSION)).select("file", "e.v")
    unknown = versions.limit(1).collect()
    if unknown:
        file, version = unknown[0]["file"], unknown[0]["v"]
        raise BadInputError(
            f"{file}: event schema version {version} is not supported (this reader: {SCHEMA_VERSION})"
        )
    events = parsed.where(good).select("e.*").drop("v")
    bad_rows = (
        parsed.where(~good & (F.trim(F.col("value")) != "")).select("file", "value").limit(1000).collect()
    )
    return events, _locate(bad_rows)


def _locate(rows: list) -> list[BadLine]:  # type: ignore[type-arg]
    """Line numbers of bad lines, found in their files (bad lines are few; good ones are many)."""
    found: list[BadLine] = []
    by_file: dict[str, list[str]] = {}
    for row in rows:
        by_file.setdefault(row["file"], []).append(row["value"])
    for file, values in by_file.items():
        path = Path(file.removeprefix("file://"))
        wanted = set(values)
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            if line in wanted:
                found.append(BadLine(path.name, number, _why(line)))
    return found


def _why(line: str) -> str:
    try:
        doc = json.loads(line)
    except ValueError:
        return "not JSON"
    if not isinstance(doc, dict):
        return "not a JSON object"
    missing = [k for k in ("ts", "client", "event") if k not in doc]
    if missing:
        return f"missing {', '.join(missing)}"
    if doc.get("event") not in EVENTS:
        return f"unknown event {doc.get('event')!r}"
    return "fields of the wrong type"


def read_faults(run_dir: Path) -> list[Fault]:
    """Fault activities of the Chaos Toolkit journal (workload starts and stops excluded)."""
    path = run_dir / "journal.json"
    if not path.exists():
        return []
    try:
        journal = json.loads(path.read_text())
        runs = journal.get("run", [])
        faults = []
        for activity in runs:
            spec = activity.get("activity", {})
            module = str(spec.get("provider", {}).get("module", ""))
            if spec.get("type") != "action" or module.endswith(".workload.actions"):
                continue
            faults.append(Fault(spec.get("name", "?"), _ns(activity["start"]), _ns(activity["end"])))
        return faults
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadInputError(f"{path} is not a Chaos Toolkit journal: {exc}") from exc


def _ns(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        from datetime import UTC

        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1e9)
