"""Where a command's CPU goes, process kind by process kind (as root).

The kernel's process accounting (acct(2)) writes one record for every process that exits, with the
CPU time of all its threads; a sampler of /proc names each process by its command line while it
runs (a Python process is the ``magnetar`` subcommand or module it runs, a JVM its main class), so
every record gets a kind. Processes still running when the command ends are counted from /proc.

    python bench/cpu_census.py -- .venv/bin/pytest tests/chaos/test_experiments.py
    python bench/cpu_census.py --watch-pid 1234        # until an already-running process ends
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import click

#: struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime, etime,
#: utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t), comm[16]
ACCT_V3 = struct.Struct("<BBHIIIIIIf8H16s")
TICKS = os.sysconf("SC_CLK_TCK")

JAVA_KINDS = (
    ("org.apache.zookeeper", "java: ZooKeeper"),
    ("CoarseGrainedExecutorBackend", "java: Spark executor"),
    ("deploy.master.Master", "java: Spark master"),
    ("deploy.worker.Worker", "java: Spark worker"),
    ("SparkSubmit", "java: Spark driver"),
)


def comp_t(value: int) -> int:
    """The kernel's 13-bit mantissa, 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def kind_of(argv: list[str]) -> str:
    """A short name for what a process runs."""
    if not argv:
        return "?"
    exe = Path(argv[0]).name
    joined = " ".join(argv)
    if exe.startswith("java"):
        return next((kind for key, kind in JAVA_KINDS if key in joined), "java: other")
    if exe.startswith("python") or exe in {"pytest", "magnetar", "chaos"}:
        return "python: " + python_kind(exe, argv[1:])
    return exe


def python_kind(exe: str, args: list[str]) -> str:
    if exe in {"pytest", "magnetar", "chaos"}:
        return exe + (f" {args[0]}" if exe != "pytest" and args else "")
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            module = args[i + 1]
            rest = [a for a in args[i + 2 : i + 4] if not a.startswith("-")]
            return " ".join([module, *rest[:1]]) if module == "magnetar" else module
        if arg.endswith(".py") or "/bin/" in arg:
            return Path(arg).name + (f" {args[i + 1]}" if i + 1 < len(args) else "")
        if arg == "-c":
            return "-c"
    return "python"


def read_argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first); none if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def started_at(pid: int) -> float | None:
    """When process ``pid`` started, in seconds since the epoch (None: gone)."""
    fields = stat(pid)
    return start_of(fields) if fields else None


def start_of(fields: list[str]) -> float:
    """The start, in seconds since the epoch, of the process whose stat ``fields`` these are."""
    return BOOT_TIME + int(fields[19]) / TICKS  # starttime: ticks since boot


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


BOOT_TIME = _boot_time()


class Sampler(threading.Thread):
    """Names every process it sees: pid -> {the second it started: kind}, an entry for each
    process that had that pid (pids are reused over a long command), the last command line seen
    after its exec having the last word."""

    def __init__(self, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.kinds: dict[int, dict[int, str]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                pid = int(entry)
                argv = read_argv(pid)
                start = started_at(pid)
                if argv and start is not None:
                    self.kinds.setdefault(pid, {})[round(start)] = kind_of(argv)

    def kind(self, pid: int, start: float) -> str | None:
        """The kind of the process ``pid`` that started at ``start`` (to the second), if seen."""
        seen = self.kinds.get(pid, {})
        for when in (round(start), round(start) - 1, round(start) + 1):
            if when in seen:
                return seen[when]
        return None

    def parent(self, ppid: int, child_start: float) -> str:
        """The kind of ``ppid`` when it started a child at ``child_start``: the last process seen
        with that pid that had started by then."""
        starts = [when for when in self.kinds.get(ppid, {}) if when <= child_start + 1]
        return self.kinds[ppid][max(starts)] if starts else "?"


@dataclass(frozen=True)
class Process:
    kind: str
    parent: str
    seconds: float


def census(accounting: Path, sampler: Sampler, before: set[int]) -> list[Process]:
    """Every process that ran, by kind: those that ended from the accounting file, the rest
    (started meanwhile, still running) from /proc, their kind marked so."""
    processes = []
    data = accounting.read_bytes()
    for offset in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        record = ACCT_V3.unpack_from(data, offset)
        if record[1] != 3:
            continue
        pid, ppid, btime, utime, stime, comm = (
            record[6], record[7], record[8], record[10], record[11], record[18]
        )  # fmt: skip
        seconds = (comp_t(utime) + comp_t(stime)) / 100  # AHZ
        name = comm.split(b"\0")[0].decode(errors="replace")
        kind = sampler.kind(pid, btime) or f"{name} (unsampled)"
        processes.append(Process(kind, sampler.parent(ppid, btime), seconds))
    # still running (a process, not a thread or a later owner of the pid): what it used so far;
    # a zombie has ended, and its record is in the accounting file already
    for entry in os.listdir("/proc"):
        pid = int(entry) if entry.isdigit() else 0
        fields = stat(pid) if pid and pid not in before else []
        if not fields or fields[0] == "Z":
            continue
        start = start_of(fields)
        running = sampler.kind(pid, start)
        if running is not None:
            seconds = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime of every thread
            processes.append(Process(running + " (running)", sampler.parent(int(fields[1]), start), seconds))
    return processes


def machine_busy() -> tuple[float, float]:
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / TICKS, sum(fields) / TICKS


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--watch-pid", type=int, help="Count until this running process ends (no command).")
@click.option("--json-out", type=click.Path(path_type=Path), help="Also write the census as JSON.")
@click.option(
    "--heaviest", type=int, default=0, show_default=True,
    help="Also list the N processes that used the most CPU, each with its parent's kind.",
)  # fmt: skip
@click.argument("command", nargs=-1)
def main(watch_pid: int | None, json_out: Path | None, heaviest: int, command: tuple[str, ...]) -> None:
    """Run COMMAND (or watch --watch-pid) and print the CPU seconds of each kind of process.

    \b
    Examples:
      python bench/cpu_census.py -- .venv/bin/pytest tests/chaos -x
      python bench/cpu_census.py --watch-pid "$(pgrep -of 'pytest tests/kube')" --json-out /tmp/c.json
      python bench/cpu_census.py --heaviest 30 -- make test
    """
    if os.geteuid() != 0:
        raise click.ClickException("process accounting needs root")
    if not command and watch_pid is None:
        raise click.UsageError("give a command or --watch-pid")
    libc = ctypes.CDLL(None, use_errno=True)
    accounting = Path(tempfile.mkstemp(prefix="pacct-")[1])
    if libc.acct(str(accounting).encode()) != 0:
        raise click.ClickException(f"acct(2): {os.strerror(ctypes.get_errno())}")
    before = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    sampler = Sampler()
    sampler.sample()
    sampler.start()
    busy0, total0 = machine_busy()
    started = time.monotonic()
    try:
        if command:
            returncode = subprocess.call(list(command))
        else:
            while Path(f"/proc/{watch_pid}").exists():
                time.sleep(1)
            returncode = 0
    finally:
        sampler.sample()
        sampler.done.set()
        libc.acct(None)
    wall = time.monotonic() - started
    busy1, total1 = machine_busy()
    processes = census(accounting, sampler, before)
    accounting.unlink()
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for process in processes:
        totals[process.kind] = totals.get(process.kind, 0.0) + process.seconds
        counts[process.kind] = counts.get(process.kind, 0) + 1
    report(totals, counts, wall, busy1 - busy0, total1 - total0)
    if heaviest:
        report_heaviest(processes, heaviest)
    if json_out:
        json_out.write_text(json.dumps({"wall_s": wall, "cpu_s": totals, "processes": counts}, indent=2))
    sys.exit(returncode)


def short(kind: str, width: int) -> str:
    return re.sub(r"\s+", " ", kind)[:width]


def report(totals: dict[str, float], counts: dict[str, int], wall: float, busy: float, total: float) -> None:
    counted = sum(totals.values())
    share = 100 * busy / max(total, 1)
    print(f"\nwall {wall:.0f} s; busy {busy:.0f} core-s of {total:.0f} ({share:.0f}%); counted {counted:.0f}")
    print(f"{'kind':58} {'processes':>9} {'core-s':>9} {'share':>6}")
    for kind, seconds in sorted(totals.items(), key=lambda item: -item[1])[:40]:
        percent = 100 * seconds / max(counted, 1)
        print(f"{short(kind, 58):58} {counts[kind]:9d} {seconds:9.1f} {percent:5.1f}%")


def report_heaviest(processes: list[Process], count: int) -> None:
    print(f"\n{'the heaviest processes':44} {'started by':44} {'core-s':>9}")
    for process in sorted(processes, key=lambda p: -p.seconds)[:count]:
        print(f"{short(process.kind, 44):44} {short(process.parent, 44):44} {process.seconds:9.1f}")


if __name__ == "__main__":
    main()
