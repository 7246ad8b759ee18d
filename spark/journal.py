"""Fault activities from the Chaos Toolkit journal (``journal.json``) of a run.

A journal's ``run`` lists the method's activity runs: ``activity`` ({name, type action|probe,
provider}), ``start``/``end`` (ISO 8601), ``status``; ``rollbacks`` has the same shape. A fault is
an action of either list, except the workload's own start and stop: they frame the run, they do
not disturb it. They are told by their provider's module (the run directory's contract,
``WORKLOAD_MODULES``), whatever their name. Repeated names get ``#2``, ``#3`` so that every fault
is one row of the report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from magnetar.common.run_directory import WORKLOAD_MODULES, Layout
from magnetar.spark.errors import BadInputError
from magnetar.spark.location import Location, Where

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Fault:
    name: str
    start_ns: int
    end_ns: int
    phase: str = "method"  # or "rollback"
    status: str = "succeeded"


def read_faults(run_dir: Where) -> list[Fault] | None:
    """The faults in time order; None when the run has no journal."""
    path = Location.of(run_dir) / Layout.JOURNAL
    if not path.exists():
        return None
    try:
        journal = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInputError(f"{path}: not readable as JSON ({exc})") from exc
    if not isinstance(journal, dict) or not isinstance(journal.get("run", []), list):
        raise BadInputError(f"{path}: not a Chaos Toolkit journal (no 'run' list of activities)")
    faults: list[Fault] = []
    for phase, key in (("method", "run"), ("rollback", "rollbacks")):
        entries = journal.get(key) or []
        if not isinstance(entries, list):
            raise BadInputError(f"{path}: '{key}' is not a list of activity runs")
        for index, entry in enumerate(entries):
            fault = _fault(entry, phase, f"{path}: {key}[{index}]")
            if fault is not None:
                faults.append(fault)
    faults.sort(key=lambda f: (f.start_ns, f.end_ns))
    return _unique_names(faults)


def _fault(entry: Any, phase: str, where: str) -> Fault | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("activity"), dict):
        raise BadInputError(f"{where}: an activity run needs an 'activity' object")
    activity = entry["activity"]
    if activity.get("type") != "action" or _is_workload(activity):
        return None
    if "start" not in entry:
        raise BadInputError(f"{where}: activity {activity.get('name')!r} has no 'start' time")
    start = _ns(entry["start"], where)
    end = _ns(entry["end"], where) if entry.get("end") else start
    return Fault(str(activity.get("name", "?")), start, max(start, end), phase, str(entry.get("status", "")))


def _is_workload(activity: dict[str, Any]) -> bool:
    """The workload's own action: its provider's module is the workload's (its name says nothing)."""
    provider = activity.get("provider")
    module = provider.get("module") if isinstance(provider, dict) else None
    return isinstance(module, str) and module in WORKLOAD_MODULES


def _ns(text: Any, where: str) -> int:
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadInputError(f"{where}: {text!r} is not an ISO 8601 time") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # chaostoolkit writes UTC
    return (moment - EPOCH) // timedelta(microseconds=1) * 1000


def _unique_names(faults: list[Fault]) -> list[Fault]:
    seen: dict[str, int] = {}
    named = []
    for fault in faults:
        seen[fault.name] = seen.get(fault.name, 0) + 1
        count = seen[fault.name]
        name = fault.name if count == 1 else f"{fault.name}#{count}"
        named.append(Fault(name, fault.start_ns, fault.end_ns, fault.phase, fault.status))
    return named
