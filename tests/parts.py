"""`make test`'s two pytest runs: the suite, and the tests marked exclusive (timing under a fault,
tests/scheduling.py) side by side with it, the exclusive ones in a CPU cgroup of their own.

The exclusive tests judge a resume against the clock (publishing within 1 s of ZooKeeper's
return), so a broker that waits for a core fails them: beside the suite at an equal share they
fail, and alone they keep only about half of the 2 cores busy (much of each run waits out a
frozen ZooKeeper). In the cgroup, their clusters get a core the moment they want one (its weight
is cgroup v1's largest, against 1,024 for each of the suite's sessions, each its own autogroup),
up to 1.5 cores, so the suite always keeps half a core: its own clusters' ZooKeeper sessions of
4 s must not starve. Their processes stay in the cgroup whatever they do (a new session
included); their Spark session's JVM, started outside it (`outside_priority`), does not judge a
clock and takes its turn with the suite.

The kube tier's node gets a weight of its own too (`node_priority`): its tests keep to one worker
and are the suite's longest chain, and each waits on pods that starve beside the other workers.

Where no cgroup can be made (not root, no cgroup v1 cpu controller), the exclusive tests run
alone after the suite, as before. Usage (the Makefile's)::

    python -m tests.parts -- pytest -n 3 --exclusive=skip -- pytest --exclusive=only
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")
#: cgroup v1's largest cpu.shares; a process of the suite in a session of its own weighs 1,024
SHARES = 262_144
#: at most 1.5 cores: CPU time per scheduling period, in microseconds
PERIOD_US, QUOTA_US = 100_000, 150_000
#: set for the exclusive tests' pytest: the cgroup it runs in
GROUP_ENV = "MAGNETAR_PRIORITY_CGROUP"
#: the weight of a kube node's processes, and of its pods together, while the kube tier runs: four
#: sessions' worth, so their bursts (a rollout's pods starting) come before the other workers' tests
NODE_SHARES = 4096
#: where containerd makes its containers' CPU cgroups (its CRI namespace), pods of every node here
PODS_CGROUP = "k8s.io"


def cgroups_here() -> bool:
    """Whether this process may make CPU cgroups: root, and cgroup v1's cpu controller."""
    return os.geteuid() == 0 and (CPU_CGROUPS / "cpu.shares").exists()


def priority_group() -> Path | None:
    """A new CPU cgroup for the exclusive tests, or None where none can be made here."""
    if not cgroups_here():
        return None
    group = CPU_CGROUPS / f"magnetar-exclusive-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cpu.shares").write_text(str(SHARES))
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(QUOTA_US))
    except OSError as exc:
        print(f"exclusive tests: no CPU cgroup ({exc}); they run after the rest", flush=True)
        return None
    return group


def remove(group: Path) -> None:
    """The cgroup, once its last process has gone (stragglers are moved to the root group first)."""
    for pid in (group / "cgroup.procs").read_text().split():
        with contextlib.suppress(OSError):  # gone meanwhile
            (CPU_CGROUPS / "cgroup.procs").write_text(pid)
    group.rmdir()


@contextlib.contextmanager
def node_priority(pids: Iterable[int]) -> Iterator[None]:
    """While the block runs, a `magnetar kube up` node (its processes ``pids``, and what they start)
    and its pods weigh NODE_SHARES each against the suite's sessions; nothing where no cgroup can be
    made. The pods set no CPU request, so each container has the 2 shares of a BestEffort pod, in
    containerd's cgroup ``k8s.io`` (1,024 against each of the other workers' sessions): on 3 workers
    the kube tier's rollouts took twice their time on 2, waiting for pods to start."""
    if not cgroups_here():
        yield
        return
    group = CPU_CGROUPS / f"magnetar-kube-{os.getpid()}"
    pods = CPU_CGROUPS / PODS_CGROUP
    try:
        pods.mkdir(exist_ok=True)  # first: a failure then leaves nothing of ours behind
        group.mkdir()
    except OSError as exc:
        print(f"kube node: no CPU cgroup ({exc}); it shares the cores equally", flush=True)
        yield
        return
    pods_before = (pods / "cpu.shares").read_text().strip()
    try:
        for cgroup in (group, pods):
            (cgroup / "cpu.shares").write_text(str(NODE_SHARES))
        for pid in pids:
            with contextlib.suppress(OSError):  # gone meanwhile
                (group / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        (pods / "cpu.shares").write_text(pods_before)
        remove(group)


@contextlib.contextmanager
def outside_priority() -> Iterator[None]:
    """In the exclusive tests' pytest: this process in the root CPU cgroup while the block runs, so
    the processes it starts meanwhile stay out of the priority cgroup; back in it after."""
    group = os.environ.get(GROUP_ENV)
    if not group:
        yield
        return
    (CPU_CGROUPS / "cgroup.procs").write_text(str(os.getpid()))
    try:
        yield
    finally:
        (Path(group) / "cgroup.procs").write_text(str(os.getpid()))


def split(argv: list[str]) -> tuple[list[str], list[str]]:
    if len(argv) < 4 or argv[0] != "--" or "--" not in argv[1:]:
        raise SystemExit(__doc__)
    cut = argv.index("--", 1)
    return argv[1:cut], argv[cut + 1 :]


def run(suite: list[str], exclusive: list[str]) -> int:
    group = priority_group()
    if group is None:
        first = subprocess.call(suite)
        return subprocess.call(exclusive) or first
    log = Path(tempfile.mkstemp(prefix="magnetar-exclusive-", suffix=".log")[1])
    print(f"exclusive tests: beside the suite, at CPU priority (cgroup {group}); their output "
          f"follows the suite's (meanwhile in {log})", flush=True)  # fmt: skip
    procs = group / "cgroup.procs"
    started = time.monotonic()
    ended: dict[str, float] = {}
    try:
        with log.open("w") as out:
            beside = subprocess.Popen(
                exclusive, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, GROUP_ENV: str(group)},
                preexec_fn=lambda: procs.write_text("0"),  # this child, before it runs pytest
            )  # fmt: skip
            watcher = threading.Thread(target=lambda: ended.setdefault("exclusive", _waited(beside)))
            watcher.start()
            first = subprocess.call(suite)
            ended["suite"] = time.monotonic()
            watcher.join()
    finally:
        remove(group)
    print(f"\n{'=' * 30} the exclusive tests, run beside {'=' * 30}", flush=True)
    print(log.read_text(), flush=True)
    log.unlink()
    print(f"the suite {_minutes(ended['suite'] - started)}, the exclusive tests beside it "
          f"{_minutes(ended['exclusive'] - started)}", flush=True)  # fmt: skip
    return first or beside.returncode


def _waited(process: subprocess.Popen[bytes]) -> float:
    process.wait()
    return time.monotonic()


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


if __name__ == "__main__":
    suite, exclusive = split(sys.argv[1:])
    sys.exit(run(suite, exclusive))
