"""Actions on the processes of a local cluster: crashes, clean stops, restarts, freezes.

Each returns what it did (process name, pid, signal) so the journal records exactly which
process was hit. Without ``name`` or ``index`` a running process of the role is picked at
random (within ``region`` when given).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.chaos.pods import is_kube
from magnetar.chaos.process import targets
from magnetar.local.supervisor import LocalClusterError, Supervisor, alive, process_state

__all__ = [
    "freeze_process",
    "kill_bookie",
    "kill_broker",
    "metadata_store_outage",
    "region_outage",
    "restore_region",
    "rolling_restart",
    "start_bookie",
    "start_broker",
    "stop_bookie",
    "terminate_broker",
    "thaw_process",
]

Result = dict[str, Any]


def _signal(role: str, sig: signal.Signals, **where: Any) -> Result:
    configuration = where.pop("configuration", None)
    directory = targets.cluster_dir(where.pop("cluster_dir", None), configuration)
    record = targets.pick(targets.load(directory), role, **where)
    os.kill(record.pid, sig)
    return {"name": record.name, "pid": record.pid, "signal": sig.name, "at": time.time()}


def _wait_until(condition: Callable[[], bool], failure: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise ActivityFailed(failure)
        time.sleep(0.02)


def _halted(pid: int) -> bool:
    return process_state(pid) in ("T", "X", "Z")


def _wait_gone(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() > deadline:
            raise ActivityFailed(f"process {pid} still running {timeout_s:.0f}s after the signal")
        time.sleep(0.05)


def kill_bookie(
    region: str | None = None,
    index: int | None = None,
    name: str | None = None,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Crash a bookie with SIGKILL, as a lost machine would: no flush, no goodbye. Its
    registration lingers until its metadata-store session times out (``zk_timeout``)."""
    result = _signal("bookie", signal.SIGKILL, region=region, index=index, name=name,
                     cluster_dir=cluster_dir, configuration=configuration)  # fmt: skip
    _wait_gone(result["pid"], 10)
    return result


def stop_bookie(
    region: str | None = None,
    index: int | None = None,
    name: str | None = None,
    timeout_s: float = 30,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Stop a bookie cleanly with SIGTERM and wait until it has exited: it flushes its journal
    and unregisters at once."""
    result = _signal("bookie", signal.SIGTERM, region=region, index=index, name=name,
                     cluster_dir=cluster_dir, configuration=configuration)  # fmt: skip
    _wait_gone(result["pid"], timeout_s)
    return result


def _start(role: str, region: str | None, index: int | None, name: str | None, directory: str | None,
           configuration: dict[str, Any] | None, timeout_s: float) -> Result:  # fmt: skip
    path = targets.cluster_dir(directory, configuration)
    if is_kube(path):  # the kubelet starts a pod's container again: wait for it
        from magnetar.chaos.pods import target as pod_target  # pods only: the operator's modules

        record = targets.pick(targets.load(path), role, name=name, region=region, index=index, running=None)
        started = pod_target.wait_running(path, record.name, timeout_s)
        return {"name": started.name, "pid": started.pid, "address": started.address, "at": time.time()}
    record = targets.pick(targets.load(path), role, name=name, region=region, index=index, running=False)
    try:
        started = Supervisor(path).restart(record.name, timeout_s=timeout_s)
    except LocalClusterError as exc:
        raise ActivityFailed(str(exc)) from exc
    return {"name": started.name, "pid": started.pid, "address": started.address, "at": time.time()}


def start_bookie(
    region: str | None = None,
    index: int | None = None,
    name: str | None = None,
    timeout_s: float = 60,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Start a stopped or killed bookie again on its own directories and port (so it keeps its
    bookie id); it replays its journal and registers. Waits until it is ready."""
    return _start("bookie", region, index, name, cluster_dir, configuration, timeout_s)


def kill_broker(
    region: str | None = None,
    index: int | None = None,
    name: str | None = None,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Crash a broker with SIGKILL: its bundles are orphaned until its session times out and
    another broker takes them; clients reconnect with backoff."""
    result = _signal("broker", signal.SIGKILL, region=region, index=index, name=name,
                     cluster_dir=cluster_dir, configuration=configuration)  # fmt: skip
    _wait_gone(result["pid"], 10)
    return result


def terminate_broker(
    region: str | None = None,
    index: int | None = None,
    name: str | None = None,
    timeout_s: float = 60,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Shut a broker down gracefully with SIGTERM (it hands its bundles over first) and wait
    until it has exited."""
    result = _signal("broker", signal.SIGTERM, region=region, index=index, name=name,
                     cluster_dir=cluster_dir, configuration=configuration)  # fmt: skip
    _wait_gone(result["pid"], timeout_s)
    return result


def start_broker(
    region: str | None = None,
    index: int | None = None,
    name: str | None = None,
    timeout_s: float = 60,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Start a stopped or killed broker again with its configuration; waits until it is ready."""
    return _start("broker", region, index, name, cluster_dir, configuration, timeout_s)


def rolling_restart(
    role: str = "broker",
    region: str | None = None,
    pause_s: float = 3.0,
    timeout_s: float = 600,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Restart every process of ``role`` (``broker`` or ``bookie``) in ``region`` (None: the
    first region) one at a time. Locally: SIGTERM (a broker hands its bundles over first), wait
    until it exited, start it again and wait until it is ready, then ``pause_s`` before the
    next one. On pods,
    through the operator: a new ``restartedAt`` in the MagnetarCluster's spec, and the operator's
    own roll (a broker after its bundles are transferred away, a bookie once nothing is
    under-replicated) until it says Converged; ``pause_s`` does not apply.

    Example::

        {"type": "action", "name": "roll-brokers",
         "provider": {"type": "python", "module": "magnetar.chaos.process.actions",
                      "func": "rolling_restart", "arguments": {"role": "broker"}}}
    """
    path = targets.cluster_dir(cluster_dir, configuration)
    if is_kube(path):
        from magnetar.chaos.pods import rolling  # pods only: the operator's modules

        return rolling.restart(path, role, region, timeout_s)
    state = targets.load(path)
    regions = sorted({p.region for p in state.processes if p.role == role})
    if not regions or (region is not None and region not in regions):
        raise ActivityFailed(f"no {role} in {region or 'the cluster'} to restart")
    region = region or regions[0]
    names = sorted(p.name for p in state.processes if p.role == role and p.region == region)
    started = time.monotonic()
    done = []
    for name in names:
        record = targets.pick(targets.load(path), role, name=name, running=None)
        if alive(record.pid):
            os.kill(record.pid, signal.SIGTERM)
            _wait_gone(record.pid, timeout_s)
        try:
            restarted = Supervisor(path).restart(name, timeout_s=timeout_s)
        except LocalClusterError as exc:
            raise ActivityFailed(str(exc)) from exc
        done.append({"name": name, "stopped_pid": record.pid, "pid": restarted.pid, "at": time.time()})
        if name != names[-1]:  # after the last one, the experiment's own pause takes over
            time.sleep(pause_s)
    return {"role": role, "region": region, "restarted": done, "took_s": round(time.monotonic() - started, 3)}


def freeze_process(
    name: str,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Freeze a process with SIGSTOP: it holds its sockets and sessions but answers nothing,
    like a machine in a long GC pause or a hung disk. Undo with ``thaw_process``."""
    path = targets.cluster_dir(cluster_dir, configuration)
    record = next((p for p in targets.load(path).processes if p.name == name), None)
    if record is None or not alive(record.pid):
        raise ActivityFailed(f"no running process named {name!r} in {path}")
    os.kill(record.pid, signal.SIGSTOP)
    _wait_until(lambda: process_state(record.pid) == "T", f"{name} did not stop")
    return {"name": name, "pid": record.pid, "signal": "SIGSTOP", "at": time.time()}


def thaw_process(
    name: str,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Let a frozen process run again (SIGCONT)."""
    path = targets.cluster_dir(cluster_dir, configuration)
    record = next((p for p in targets.load(path).processes if p.name == name), None)
    if record is None or not alive(record.pid):
        raise ActivityFailed(f"no process named {name!r} to thaw in {path}")
    os.kill(record.pid, signal.SIGCONT)
    _wait_until(lambda: process_state(record.pid) != "T", f"{name} did not resume")
    return {"name": name, "pid": record.pid, "signal": "SIGCONT", "at": time.time()}


def metadata_store_outage(
    seconds: float = 20,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Freeze the cluster's ZooKeeper for ``seconds`` (SIGSTOP, then SIGCONT): every broker and
    bookie loses its metadata store at once, as in a ZooKeeper host's long GC pause or a network
    blackout around it. One activity for the whole outage, so the journal's start and end are
    the fault's. Sessions shorter than the outage expire when ZooKeeper comes back."""
    try:
        duration = float(seconds)
    except (TypeError, ValueError):
        raise ActivityFailed(f"seconds must be a number, not {seconds!r}") from None
    if not 0 < duration <= 600:
        raise ActivityFailed(f"seconds must be within (0, 600], not {duration}")
    path = targets.cluster_dir(cluster_dir, configuration)
    zookeeper = next((p for p in targets.load(path).processes if p.role == "zookeeper"), None)
    if zookeeper is None or not alive(zookeeper.pid):
        raise ActivityFailed(f"no running ZooKeeper in {path}")
    os.kill(zookeeper.pid, signal.SIGSTOP)
    frozen_at = time.time()
    try:
        _wait_until(lambda: process_state(zookeeper.pid) == "T", "ZooKeeper did not stop")
        time.sleep(max(0.0, duration - (time.time() - frozen_at)))
    finally:
        os.kill(zookeeper.pid, signal.SIGCONT)
    return {"name": zookeeper.name, "pid": zookeeper.pid, "frozen_at": frozen_at, "thawed_at": time.time()}


def region_outage(
    region: str,
    mode: str = "freeze",
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """Take a whole region down: every bookie and broker of it frozen (``mode: freeze``,
    connections hang as in a network blackout) or killed (``mode: kill``, as in a power loss).
    Undo with ``restore_region``."""
    if mode not in ("freeze", "kill"):
        raise ActivityFailed(f"region_outage mode must be 'freeze' or 'kill', not {mode!r}")
    path = targets.cluster_dir(cluster_dir, configuration)
    hit = []
    sig = signal.SIGSTOP if mode == "freeze" else signal.SIGKILL
    pids = []
    for record in targets.load(path).processes:
        if record.region == region and record.role in ("bookie", "broker") and alive(record.pid):
            os.kill(record.pid, sig)
            hit.append(record.name)
            pids.append(record.pid)
    for pid in pids:  # the outage is in place only once every process is stopped or gone
        _wait_until(partial(_halted, pid), f"process {pid} still runs")
    if not hit:
        raise ActivityFailed(f"region {region!r} has no running bookie or broker in {path}")
    return {"region": region, "mode": mode, "processes": hit, "at": time.time()}


def restore_region(
    region: str,
    timeout_s: float = 60,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> Result:
    """End a region outage: thaw frozen processes, start killed ones again (bookies first)."""
    path = targets.cluster_dir(cluster_dir, configuration)
    supervisor = Supervisor(path)
    restored = []
    records = [
        p for p in targets.load(path).processes if p.region == region and p.role in ("bookie", "broker")
    ]
    for record in sorted(records, key=lambda p: p.role != "bookie"):
        if alive(record.pid):
            os.kill(record.pid, signal.SIGCONT)
        elif is_kube(path):
            from magnetar.chaos.pods import target as pod_target  # pods only: the operator's modules

            pod_target.wait_running(path, record.name, timeout_s)
        else:
            try:
                supervisor.restart(record.name, timeout_s=timeout_s)
            except LocalClusterError as exc:
                raise ActivityFailed(str(exc)) from exc
        restored.append(record.name)
    return {"region": region, "processes": restored, "at": time.time()}
