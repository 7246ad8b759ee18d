"""Where a message's CPU goes, stage by stage: a py-spy profile of each server (collapsed stacks,
a thread's apart) weighed by the CPU time each thread used over the same seconds (/proc).

A sample belongs to the stage of its innermost frame that names one (the deepest code the
thread was in). On the event loop's thread a sample in Python code counts as 1/rate s of CPU, and
what is left of the thread's CPU is the loop's own native work (uvloop, socket I/O, protobuf in C
called from there): py-spy samples a loop waiting in epoll as running, so its frameless samples
say nothing. Another thread's CPU goes by its samples' shares. Samples of a thread waiting (on a
condition, a queue, poll) are left out, whatever py-spy judged.

    .venv/bin/python bench/cpu_stages.py runs/bench/bench_latency.json   # after bench_latency --profile
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

#: (stage, path fragments); the first stage whose fragment is in a frame's file wins, innermost
#: frame first
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("journal", ("bookie/journal.py",)),
    ("entry log and index", ("bookie/entry_log.py", "bookie/index.py", "bookie/ledger_storage.py")),
    ("bookie add (request, checks, digest)", ("bookie/server.py", "bookie/bookie.py", "bookie/digest.py")),
    ("gRPC, Python side", ("grpc/",)),
    ("ledger client", ("magnetar/bookie/client/",)),
    ("managed ledger", ("broker/managed_ledger/",)),
    (
        "broker dispatch",
        (
            "broker/dispatcher.py",
            "broker/consumer.py",
            "broker/subscription.py",
            "broker/cnx/consumer_commands.py",
        ),
    ),
    (
        "broker publish (frames, producer, topic)",
        (
            "broker/cnx/",
            "broker/protocol/",
            "broker/topic.py",
            "broker/deduplication.py",
            "asyncio/streams.py",
        ),
    ),
    ("metadata store client", ("kazoo/", "common/metadata/")),
    ("metrics and loop monitor", ("prometheus_client/", "common/loop_monitor.py", "metrics.py", "aiohttp/")),
)
NATIVE = "native: uvloop, gRPC core, I/O (no Python frame)"
_FILE = re.compile(r"\(([^():]+)(?::\d+)?\)$")
_THREAD = re.compile(r"^thread \((\d+)\)")
#: innermost frames that are a thread waiting, whatever py-spy judged: a thread that wakes every
#: few milliseconds (the loop monitor's watchdog) is often sampled "active" while it waits
_WAITS = (
    "Condition.wait (",
    "Event.wait (",
    "Queue.get (",
    "poll_select (",
    "select (",
    "_wait_for_tstate_lock (",
)


def stage_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        found = _FILE.search(frame)
        if found is None:
            continue
        path = found.group(1)
        for stage, fragments in STAGES:
            if any(fragment in path for fragment in fragments):
                return stage
    leaf = frames[-1]
    if "_poll" in frames[0]:
        return "gRPC core's poller thread"
    if leaf.startswith("_worker (concurrent/futures/thread.py"):
        return "thread-pool hand-offs (asyncio.to_thread)"
    if "Runner.run" in leaf or "uvloop" in leaf or len(frames) == 1:
        return NATIVE
    return "other"


def thread_samples(path: Path) -> dict[str, Counter[str]]:
    """Samples by stage of each thread of one collapsed-stack profile (py-spy ``--threads``: the
    first frame names the thread, ``thread (TID): name``), its waits left out."""
    threads: dict[str, Counter[str]] = {}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        if frames[-1].startswith(_WAITS):
            continue
        found = _THREAD.match(frames[0])
        tid = found.group(1) if found else "?"
        threads.setdefault(tid, Counter())[stage_of(frames)] += int(count)
    return threads


def weigh(threads: dict[str, Counter[str]], thread_cpu: dict[str, float], rate: float) -> Counter[str]:
    """CPU seconds by stage. A sample in Python code is 1/rate s of CPU (the thread was running
    it, or in a system call it made); an event-loop thread's samples without a Python frame are
    mostly its wait in epoll, which py-spy samples as running: the loop's native work is what is
    left of the thread's CPU. Other threads' CPU goes by their samples' shares."""
    seconds: Counter[str] = Counter()
    for tid, used in thread_cpu.items():
        stages = threads.get(tid)
        if not stages or used <= 0:
            if used > 0:
                seconds["other"] += used
            continue
        if NATIVE not in stages:
            total = sum(stages.values())
            for stage, samples in stages.items():
                seconds[stage] += used * samples / total
            continue
        in_python = {stage: samples / rate for stage, samples in stages.items() if stage != NATIVE}
        scale = min(1.0, used / sum(in_python.values())) if in_python else 1.0
        for stage, spent in in_python.items():
            seconds[stage] += spent * scale
        seconds[NATIVE] += max(0.0, used - sum(in_python.values()))
    return seconds


def stage_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per stage: microseconds of CPU per message, by server and in total. Without the threads'
    CPU in the result (older JSON), each process's CPU goes by its samples' shares."""
    cpu = {row["server"]: row["cpu_s"] for row in result["cpu"]}
    messages = result["cpu"][-1]["messages"]
    per_thread = result.get("thread_cpu_s", {})
    rate = result.get("profile_rate", 200)
    per_stage: dict[str, dict[str, float]] = {}
    for profile in result.get("profiles", []):
        server = Path(profile).name.rsplit("-", 1)[0]
        if server not in cpu:
            continue
        threads = thread_samples(Path(profile))
        if server in per_thread:
            seconds = weigh(threads, per_thread[server], rate)
        else:
            merged = sum(threads.values(), Counter())
            total = sum(merged.values())
            shares = {stage: n / total * cpu[server] for stage, n in merged.items()} if total else {}
            seconds = Counter(shares)
        for stage, spent in seconds.items():
            per_stage.setdefault(stage, {})[server] = spent / messages * 1e6
    rows = [
        {"stage": stage, "by_server": by, "us_per_message": sum(by.values())}
        for stage, by in per_stage.items()
    ]
    return sorted(rows, key=lambda row: -row["us_per_message"])


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1] in {"-h", "--help"}:
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    result = json.loads(Path(sys.argv[1]).read_text())
    for row in stage_rows(result):
        servers = ", ".join(f"{name} {us:.0f}" for name, us in sorted(row["by_server"].items()))
        print(f"{row['us_per_message']:7.1f} µs  {row['stage']}  ({servers})")


if __name__ == "__main__":
    main()
