"""Time of the whole Spark post-mortem (local[2]) on generated event logs of 1M, 3M and 10M events,
and on a Spark cluster beside it.

    .venv/bin/python bench/bench_postmortem.py                  # 1M, 3M, 10M
    .venv/bin/python bench/bench_postmortem.py --sizes 1M 3M    # a quicker look
    .venv/bin/python bench/bench_postmortem.py --keep /tmp/pm   # keep (and reuse) the generated runs
    .venv/bin/python bench/bench_postmortem.py --master spark://HOST:7077   # the cluster beside local[2]
    .venv/bin/python bench/bench_postmortem.py --start-standalone --sizes 1M
        # a standalone master and worker (2 cores) started on loopback, stopped at the end
    .venv/bin/python bench/bench_postmortem.py --sizes 50k --small-input --repeat 3
        # a small log in a session for small logs, warm after the first (three or more: with C2)

Logs come from magnetar.spark.bulk (four topics, two faults with producer stalls, a few
duplicates). Each master's SparkSession is started before timing; each size is timed from reading
the logs to report.html, given to Spark by file:// URI (a cluster's executors must see the runs at
the same path: one machine, or --keep on a shared filesystem). Both masters must find the same
headline. Target: <= 60 s for 10M events on local[2] and near-linear growth. Each phase is given
in wall seconds, the JVM's CPU seconds, its tasks' CPU seconds (the work itself, without the JIT's
compiling, the garbage collector or the driver's planning) and the Spark jobs it ran (a count the
load does not move);
with --repeat each size is analysed that many times in the session, and the last run is reported.
Prints a table and writes bench/results/bench_postmortem.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

from magnetar.spark import bulk, postmortem
from magnetar.spark.ingest import event_files
from magnetar.spark.session import spark_session
from magnetar.spark.standalone import spark_env, standalone

console = Console()
RESULTS = Path(__file__).parent / "results" / "bench_postmortem.json"
SIZES = {"50k": 50_000, "1M": 1_000_000, "3M": 3_000_000, "10M": 10_000_000}
#: what is run without --sizes
DEFAULT_SIZES = ["1M", "3M", "10M"]
LOCAL = "local[2]"


def generate(root: Path, label: str, events: int) -> tuple[Path, int, float]:
    run_dir = root / f"bench-{label}"
    marker = run_dir / "events.count"
    if marker.exists():
        return run_dir, int(marker.read_text()), 0.0
    shutil.rmtree(run_dir, ignore_errors=True)
    started = time.perf_counter()
    written = bulk.write(run_dir, events)
    elapsed = time.perf_counter() - started
    marker.write_text(str(written))
    return run_dir, written, elapsed


#: the post-mortem's progress lines that start a phase (by their first word), and its name
PHASES = {
    "reading": "read",
    "disruption": "windows",
    "duplicates,": "checkers",
    "latency": "latency",
    "summary": "summary",
    "report.html": "report",
}


def jvm_cpu(spark: SparkSession) -> Callable[[], float] | None:
    """The CPU seconds used so far by a local session's JVM (its driver and executors), from
    /proc: on a shared machine a fairer measure than wall time. None where it cannot be read."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    stat = Path(f"/proc/{proc.pid}/stat") if proc is not None else None
    if stat is None or not stat.exists():
        return None
    tick = os.sysconf("SC_CLK_TCK")

    def used() -> float:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    return used


#: what the session's status store keeps, so that every stage's CPU time is still there at the end
RETAINED = {"spark.ui.retainedJobs": "100000", "spark.ui.retainedStages": "100000"}


def task_cpu(spark: SparkSession) -> Callable[[], float]:
    """The CPU seconds used so far by the session's tasks (the ``executorCpuTime`` of every stage
    in its status store): the post-mortem's work alone, on local[2] or a cluster. The JVM's CPU
    (see jvm_cpu) also counts the JIT's compiler threads, the collector and the driver's planning
    of every query, a cost of its own that does not grow with the events."""
    context = spark.sparkContext
    store = context._jsc.sc().statusStore()
    gateway: Any = context._gateway

    def used() -> float:
        no_quantiles = gateway.new_array(gateway.jvm.double, 0)
        stages = store.stageList(None, False, False, no_quantiles, gateway.jvm.java.util.ArrayList())
        return float(sum(stages.apply(i).executorCpuTime() for i in range(stages.size())) / 1e9)

    return used


def spark_jobs(spark: SparkSession) -> Callable[[], int]:
    """How many Spark jobs the session has started so far (the DAG scheduler's count)."""
    scheduler = spark.sparkContext._jsc.sc().dagScheduler()

    def started() -> int:
        return int(scheduler.numTotalJobs())

    return started


class PhaseClock:
    """Wall and JVM CPU seconds and Spark jobs of each phase of one post-mortem, told by its
    progress lines."""

    def __init__(
        self, cpu: Callable[[], float] | None, tasks: Callable[[], float], jobs: Callable[[], int]
    ) -> None:
        self.cpu = cpu
        self.tasks = tasks
        self.jobs = jobs
        self.began = time.perf_counter()
        self.marks: list[tuple[str, float, float | None, float, int]] = []

    def _now(self) -> tuple[float, float | None, float, int]:
        cpu = self.cpu() if self.cpu else None
        return time.perf_counter() - self.began, cpu, self.tasks(), self.jobs()

    def status(self, message: str) -> None:
        wall, cpu, tasks, jobs = self._now()
        console.print(f"[dim]  {wall:6.1f} s  {message}[/]")
        phase = PHASES.get(message.split(" ", 1)[0])
        if phase:
            self.marks.append((phase, wall, cpu, tasks, jobs))

    def elapsed(self) -> float:
        return time.perf_counter() - self.began

    def phases(self) -> dict[str, dict[str, float | None]]:
        """phase: its wall seconds, its JVM CPU seconds (None on a cluster), its tasks' CPU seconds
        and its Spark jobs."""
        ends = [*self.marks[1:], ("end", *self._now())]
        found: dict[str, dict[str, float | None]] = {}
        for (phase, start, start_cpu, start_tasks, start_jobs), (_, end, end_cpu, end_tasks, end_jobs) in zip(
            self.marks, ends, strict=True
        ):
            used = end_cpu - start_cpu if end_cpu is not None and start_cpu is not None else None
            found[phase] = {
                "s": round(end - start, 2),
                "cpu_s": None if used is None else round(used, 2),
                "task_cpu_s": round(end_tasks - start_tasks, 2),
                "jobs": end_jobs - start_jobs,
            }
        return found


def time_master(
    master: str,
    runs: list[tuple[str, Path, int]],
    executor_memory: str,
    *,
    small_input: bool = False,
    repeat: int = 1,
) -> dict[str, Any]:
    """One session on ``master``: its start time, and each run's seconds and headline (of the last
    of ``repeat`` post-mortems of it; ``small_input``: a session for small logs, started for all
    the post-mortems it will run)."""
    started = time.perf_counter()
    conf = RETAINED if master.startswith("local") else {**RETAINED, "spark.executor.memory": executor_memory}
    logged = sum(f.size() for _, run_dir, _ in runs for f in event_files(run_dir))
    spark = spark_session(
        master, conf=conf, small_input=small_input, runs=repeat * len(runs), run_bytes=logged // len(runs)
    )
    session_s = time.perf_counter() - started
    timed: dict[str, Any] = {"session_s": round(session_s, 2), "runs": {}}
    try:
        for label, run_dir, events in runs:
            for attempt in range(1, repeat + 1):
                console.print(f"[dim]{master}, {label}: analysing ({attempt} of {repeat})[/]")
                clock = PhaseClock(jvm_cpu(spark), task_cpu(spark), spark_jobs(spark))
                out = run_dir.parent / f"report-{label}-{master.split(':')[0].split('[')[0]}"
                result = postmortem.run(run_dir.as_uri(), spark, out=out.as_uri(), status=clock.status)
                seconds = clock.elapsed()
                head = result.summary["headline"]
                assert head["events"] == events, (master, head["events"], events)
                phases = clock.phases()
                jobs = sum(int(p["jobs"] or 0) for p in phases.values())
                tasks = sum(float(p["task_cpu_s"] or 0) for p in phases.values())
                console.print(f"[dim]  {seconds:.1f} s, {jobs} Spark jobs, {tasks:.1f} tasks' CPU s[/]")
                timed["runs"][label] = {"seconds": round(seconds, 2), "headline": head, "phases": phases}
    finally:
        spark.stop()
    return timed


@contextmanager
def cluster(args: argparse.Namespace, root: Path) -> Iterator[str | None]:
    """The other master's URL: --master, or a standalone cluster started here; None for local[2] only."""
    if not args.start_standalone:
        yield args.master
        return
    # the driver's JVM (started by the first session) must bind loopback, as the daemons do
    os.environ.update(spark_env())
    with standalone(root / "standalone", cores=2, memory=args.executor_memory) as started:
        console.print(f"[dim]standalone master {started.url}, one worker of 2 cores[/]")
        yield started.url


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=DEFAULT_SIZES)
    parser.add_argument(
        "--repeat", type=int, default=1, help="post-mortems of each size; the last is reported"
    )
    parser.add_argument(
        "--small-input", action="store_true", help="sessions for small logs only (spark/session.py)"
    )
    parser.add_argument("--master", help=f"a Spark cluster's master URL, timed beside {LOCAL}")
    parser.add_argument(
        "--start-standalone",
        action="store_true",
        help="start a standalone master and worker (2 cores) on loopback as --master; stopped at the end",
    )
    parser.add_argument("--executor-memory", default="2g", help="on the cluster (and its worker's memory)")
    parser.add_argument("--keep", type=Path, help="where to write (and reuse) the generated runs")
    args = parser.parse_args()
    if args.master and args.start_standalone:
        parser.error("--master or --start-standalone, not both")
    root = (args.keep or Path(tempfile.mkdtemp(prefix="bench-postmortem-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    runs = []
    for label in args.sizes:
        run_dir, events, generated_s = generate(root, label, SIZES[label])
        console.print(f"[dim]{label}: {events:,} events ({generated_s:.1f} s to generate)[/]")
        runs.append((label, run_dir, events))
    try:
        with cluster(args, root) as other:
            # one session at a time: the machine's cores go to one master's job
            masters = [LOCAL, *([other] if other and other != LOCAL else [])]
            timed = {
                master: time_master(
                    master, runs, args.executor_memory, small_input=args.small_input, repeat=args.repeat
                )
                for master in masters
            }
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    rows = _rows(runs, masters, timed)
    # columns named short (local[2], cluster) so that the table fits a terminal; the title has the URL
    names = {m: "cluster" if m == other else m for m in masters}
    named = {m: m if names[m] == m else f"{names[m]} ({m})" for m in masters}
    sessions = ", ".join(f"{named[m]} {timed[m]['session_s']:.1f} s" for m in masters)
    table = Table(title=f"post-mortem; session start, not included: {sessions}")
    for column in ("size", "events", *[f"{names[m]} {unit}" for m in masters for unit in ("s", "ev/s")]):
        table.add_column(column, justify="right")
    table.add_column("windows", justify="right")
    table.add_column("dups", justify="right")
    for row in rows:
        figures = [f for m in masters for f in (f"{row[m]['seconds']:.1f}", f"{row[m]['events_per_s']:,}")]
        table.add_row(
            row["size"], f"{row['events']:,}", *figures, f"{row['windows']:,}", f"{row['duplicates']:,}"
        )
    console.print(table)
    console.print(_phase_table(rows, masters, names))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    sessions_s = {m: timed[m]["session_s"] for m in masters}
    RESULTS.write_text(json.dumps({"masters": masters, "session_s": sessions_s, "runs": rows}, indent=2))
    console.print(f"written {RESULTS}")


def _rows(
    runs: list[tuple[str, Path, int]], masters: list[str], timed: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """A row per size; every master must have found the same headline."""
    rows = []
    for label, _run_dir, events in runs:
        heads = [timed[m]["runs"][label]["headline"] for m in masters]
        assert all(h == heads[0] for h in heads), f"{label}: the masters disagree: {heads}"
        row: dict[str, Any] = {
            "size": label,
            "events": events,
            "windows": heads[0]["windows"],
            "duplicates": heads[0]["duplicates_same_region"],
        }
        for m in masters:
            seconds = timed[m]["runs"][label]["seconds"]
            phases = timed[m]["runs"][label]["phases"]
            row[m] = {"seconds": seconds, "events_per_s": round(events / seconds), "phases": phases}
        rows.append(row)
    return rows


def _phase_table(rows: list[dict[str, Any]], masters: list[str], names: dict[str, str]) -> Table:
    """Each size's phases: wall seconds, the JVM's CPU seconds where measured, the tasks' CPU
    seconds, and Spark jobs."""
    table = Table(title="per phase: wall s (JVM CPU s, local only; tasks' CPU s), Spark jobs")
    for column in ("size", "master", *PHASES.values()):
        table.add_column(column, justify="right")
    for row in rows:
        for m in masters:
            phases = row[m]["phases"]
            cells = []
            for phase in PHASES.values():
                took = phases.get(phase)
                if took is None:
                    cells.append("")
                elif took["cpu_s"] is None:
                    cells.append(f"{took['s']:.1f} (; {took['task_cpu_s']:.1f}), {took['jobs']}j")
                else:
                    cells.append(
                        f"{took['s']:.1f} ({took['cpu_s']:.0f}; {took['task_cpu_s']:.1f}), {took['jobs']}j"
                    )
            table.add_row(row["size"], names[m], *cells)
    return table


if __name__ == "__main__":
    main()
