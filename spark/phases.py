"""Before, during and after each fault: the time ranges latency percentiles are cut by.

``during`` runs from the fault's start to the later of its end and the end of the last disruption
window attributed to it: an unload returns in milliseconds, its effect lasts longer. ``before``
reaches back to the previous fault's ``during`` (or the start of the run), ``after`` forward to the
next fault's start (or the end of the run). A run without faults is one phase, ``run``."""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.spark.journal import Fault

NEVER, FOREVER = -(2**62), 2**62


@dataclass(frozen=True)
class Phase:
    fault: str
    phase: str  # before | during | after | run
    start_ns: int
    end_ns: int  # exclusive


def phases(faults: list[Fault], impact_end: dict[str, int]) -> list[Phase]:
    if not faults:
        return [Phase("none", "run", NEVER, FOREVER)]
    ordered = sorted(faults, key=lambda f: f.start_ns)
    during = [(f, f.start_ns, max(f.end_ns, impact_end.get(f.name, f.end_ns)) + 1) for f in ordered]
    found = []
    for index, (fault, start, end) in enumerate(during):
        previous = during[index - 1][2] if index else NEVER
        following = during[index + 1][1] if index + 1 < len(during) else FOREVER
        found.append(Phase(fault.name, "before", min(previous, start), start))
        found.append(Phase(fault.name, "during", start, end))
        found.append(Phase(fault.name, "after", end, max(end, following)))
    return found
