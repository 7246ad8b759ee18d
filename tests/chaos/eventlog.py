"""Reading a chaos run's event log (architecture §6) the plain way, to check the post-mortem against."""

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


def redeliveries_after_ack(logged: list[dict[str, Any]], grace_ns: int = 1_000_000_000) -> int:
    """Repeat receipts of a message its consumer had acknowledged at least ``grace_ns`` before the
    last new message it received ahead of the repeat (spark/duplicates.py's ``after_ack``)."""
    acked: dict[tuple[str, str], int] = {}
    for e in logged:
        if e["event"] == "ack" and e.get("uid"):
            key = (str(e["subscription"]), str(e["uid"]))
            acked[key] = min(int(e["ts"]), acked.get(key, int(e["ts"])))
    seen: set[tuple[str, str]] = set()
    last_new: dict[tuple[str, str], int] = {}
    count = 0
    for e in sorted(
        (e for e in logged if e["event"] == "receive" and e.get("uid")), key=lambda e: int(e["ts"])
    ):
        key = (str(e["subscription"]), str(e["uid"]))
        consumer = (str(e["subscription"]), str(e["client"]))
        if key not in seen:
            seen.add(key)
            last_new[consumer] = int(e["ts"])
        elif key in acked and consumer in last_new and acked[key] <= last_new[consumer] - grace_ns:
            count += 1
    return count


def postmortem_headline(run_dir: Path) -> dict[str, Any]:
    headline: dict[str, Any] = json.loads((run_dir / "report" / "summary.json").read_text())["headline"]
    return headline


def producer_windows(logged: list[dict[str, Any]], threshold_ms: float = 50) -> list[tuple[int, int]]:
    """(start, end) in ns of every closed producer window longer than the threshold, worked out
    the plain way from architecture §6: a producer's sends outstanding and no ``send_ok``."""
    steps: dict[tuple[str, str], list[tuple[int, int, bool]]] = {}
    for e in logged:
        if e.get("role") == "producer" and e["event"] in ("send", "send_ok", "send_err"):
            delta = 1 if e["event"] == "send" else -1
            steps.setdefault((str(e["client"]), str(e["topic"])), []).append(
                (int(e["ts"]), delta, e["event"] == "send_ok")
            )
    found: list[tuple[int, int]] = []
    for key_steps in steps.values():
        key_steps.sort(key=lambda s: (s[0], s[1]))  # at equal times, answers before new sends
        pending, start = 0, None
        for ts, delta, success in key_steps:
            pending += delta
            if success or pending <= 0:
                if start is not None and ts - start > threshold_ms * 1_000_000:
                    found.append((start, ts))
                start = ts if pending > 0 else None
            elif start is None:
                start = ts
    return sorted(found)
