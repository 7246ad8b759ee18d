"""Where a message's CPU goes, stage by stage: a py-spy profile of each server (collapsed stacks,
active samples only) weighted by the CPU time the process used over the same seconds.

A sample belongs to the stage of its innermost frame that names one (the deepest code the
thread was in); a sample with no Python frame below the event loop's run is the loop's own native
work (uvloop, gRPC's core, socket I/O, protobuf in C called from there). Microseconds per message
are a stage's share of the process's samples times the process's CPU seconds, over the messages.
Samples of a thread waiting (on a condition, a queue, poll) are left out, whatever py-spy judged.

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


def profile_shares(path: Path) -> tuple[int, Counter[str]]:
    """(samples, samples by stage) of one collapsed-stack profile."""
    stages: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        samples = int(count)
        frames = stack.split(";")
        if frames[-1].startswith(_WAITS):
            continue
        total += samples
        stages[stage_of(frames)] += samples
    return total, stages


def stage_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per stage: microseconds of CPU per message, by server and in total."""
    cpu = {row["server"]: row["cpu_s"] for row in result["cpu"]}
    messages = result["cpu"][-1]["messages"]
    per_stage: dict[str, dict[str, float]] = {}
    for profile in result.get("profiles", []):
        server = Path(profile).name.rsplit("-", 1)[0]
        total, stages = profile_shares(Path(profile))
        if not total or server not in cpu:
            continue
        for stage, samples in stages.items():
            per_stage.setdefault(stage, {})[server] = samples / total * cpu[server] / messages * 1e6
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
