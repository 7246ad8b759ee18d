"""Reading a chaos run's event log (DESIGN §6) the plain way, to check the post-mortem against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def events(run_dir: Path) -> list[dict[str, Any]]:
    files = (run_dir / "events").glob("*.jsonl")
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def duplicates(logged: list[dict[str, Any]]) -> tuple[int, int]:
    """(same-region, cross-region) receipts after a uid's first one, per subscription."""
    first: dict[tuple[str, str], str] = {}
    same = cross = 0
    for e in sorted((e for e in logged if e["event"] == "receive"), key=lambda e: int(e["ts"])):
        key = (str(e["subscription"]), str(e["uid"]))
        if key not in first:
            first[key] = str(e["cluster"])
        elif first[key] == str(e["cluster"]):
            same += 1
        else:
            cross += 1
    return same, cross


def postmortem_headline(run_dir: Path) -> dict[str, Any]:
    headline: dict[str, Any] = json.loads((run_dir / "report" / "summary.json").read_text())["headline"]
    return headline
