"""What ``up`` made, recorded as it is made, so ``down`` removes exactly that even after a failed or
interrupted ``up``: each process (PID and start time, so a reused PID is never signalled), the
bridge, routes, the iptables chains that appeared, and the kernel settings found before."""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Proc:
    pid: int
    start_time: int  # field 22 of /proc/<pid>/stat: tells the process from a later one with its PID

    def alive(self) -> bool:
        return start_time(self.pid) == self.start_time


@dataclass
class State:
    path: Path
    phase: str = "starting"  # "starting" until every check of `up` passed, then "up"
    port_base: int = 0
    procs: dict[str, Proc] = field(default_factory=dict)
    bridge: str | None = None
    routes: list[str] = field(default_factory=list)
    #: chains found before `up`, per "iptables:nat"-style key; anything new of ours is ours
    chains_before: dict[str, list[str]] = field(default_factory=dict)
    chains_made: dict[str, list[str]] = field(default_factory=dict)
    tables_before: list[str] = field(default_factory=list)
    sysctls_before: dict[str, str] = field(default_factory=dict)
    sysctls_after_up: dict[str, str] = field(default_factory=dict)
    dirs_before: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> State | None:
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        procs = {name: Proc(**p) for name, p in raw.pop("procs", {}).items()}
        return cls(path=path, procs=procs, **raw)

    def save(self) -> None:
        raw = asdict(self)
        raw.pop("path")
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(raw, indent=2, sort_keys=True))
        tmp.replace(self.path)  # never a half-written record, even if `up` is killed mid-write

    def record_pid(self, name: str, pid: int) -> None:
        # The start time is read at once; if the process already died it is recorded as 0 (dead).
        self.procs[name] = Proc(pid=pid, start_time=start_time(pid) or 0)
        self.save()


def start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None  # a zombie is as good as gone
    return int(fields[19])


def stop(name: str, proc: Proc, timeout_s: float = 15.0) -> bool:
    """SIGTERM, then SIGKILL after ``timeout_s``; True when the process was running."""
    if not proc.alive():
        return False
    os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.alive():
            return True
        time.sleep(0.2)
    if proc.alive():
        os.kill(proc.pid, signal.SIGKILL)
        while proc.alive() and time.monotonic() < deadline + 5:
            time.sleep(0.1)
    return True
