"""Start and stop the workload in the background of an experiment.

The workload runs as its own process (``magnetar workload``) writing the run's event log, so a
fault in the cluster never stops the record of what clients saw. Against a secured cluster its
clients authenticate (``admin_target.auth_settings``: the experiment's credentials, or the local
cluster's super-user token).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.chaos.admin_target import admin_url, auth_settings, cluster_name, service_url
from magnetar.chaos.process import targets
from magnetar.chaos.workload.rundir import run_dir as _run_dir
from magnetar.common.run_directory import Layout

__all__ = ["start_workload", "stop_workload", "stop_workloads"]

#: how long a stop waits for the workload to exit: its own shutdown takes at most 60 s for the
#: producers' last receipts, 30 s of draining and 30 s for the consumers' close (runner.py)
STOP_TIMEOUT_S = 150.0
#: how long a start waits for the workload to flow: its process's start, its clients' lookups and
#: connections, every producer's first acknowledged send and a first message received
READY_TIMEOUT_S = 60.0


def start_workload(
    topic: str = "persistent://public/default/chaos",
    producers: int = 1,
    consumers: int = 1,
    rate: float = 200,
    size: int = 256,
    keys: int = 16,
    subscription_type: str = "Shared",
    duration: float = 600,
    prefix: str = "w",
    service_url_: str | None = None,
    cluster_dir: str | None = None,
    region: str | None = None,
    subscription: str = "chaos",
    replicate_subscription_state: bool = False,
    batching: bool = False,
    partitions: int = 0,
    ready_timeout_s: float = READY_TIMEOUT_S,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Start producers and consumers (official client) that log every send, receipt, receive and
    ack to ``runs/<id>/events/``; they run until ``stop_workload`` (or ``duration`` seconds).
    With ``region``, the clients start in that region of a multi-region local cluster and know
    the others (``move_consumers`` sends the consumers there). With ``partitions``, the topic is
    created partitioned first. It returns once the workload flows (every producer had a send
    acknowledged and a consumer received a message), and fails if that does not happen within
    ``ready_timeout_s``. What it returns (in the journal) names the workload's topic, its
    subscription (None without consumers) and the clusters its clients may talk to: the run's
    ``run.json`` is made of it (magnetar.chaos.run)."""
    run_dir = _run_dir(configuration)
    others: list[str] = []
    elsewhere: list[str] = []  # the other clusters the clients know
    if region is not None:
        regions = _regions(cluster_dir, configuration)
        if region not in regions:
            raise ActivityFailed(f"no region {region!r} with a broker (regions: {sorted(regions)})")
        url, cluster = regions[region], region
        elsewhere = sorted(name for name in regions if name != region)
        others = [
            arg
            for name, u in sorted(regions.items())
            if name != region
            for arg in ("--endpoint", f"{name}={u}")
        ]
    else:
        url = service_url(service_url_, cluster_dir, configuration)
        cluster = cluster_name(cluster_dir, configuration) or "local"
    local = not (service_url_ or (configuration or {}).get("magnetar_service_url"))
    auth = auth_settings(cluster_dir, configuration, local=local)
    listener = _listener(cluster, cluster_dir, configuration) if local else ""
    log = Layout.workload(run_dir, prefix, ".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "magnetar", "workload", "--service-url", url, "--cluster", cluster,
        "--topic", topic, "--producers", str(producers), "--consumers", str(consumers),
        "--rate", str(rate), "--size", str(size), "--keys", str(keys),
        "--subscription-type", subscription_type, "--duration", str(duration),
        "--run-dir", str(run_dir), "--prefix", prefix, "--subscription", subscription, *others,
        *(["--replicate-subscription-state"] if replicate_subscription_state else []),
        *(["--batching"] if batching else []),
        *(["--auth-plugin", auth["auth_plugin"], "--auth-params", auth["auth_params"]] if auth else []),
        *(["--listener-name", listener] if listener else []),
        *(["--partitions", str(partitions), "--admin-url", admin_url(None, cluster_dir, configuration)]
          if partitions else []),
    ]  # fmt: skip
    # Each client's event log is read from where it ends now: a log of an earlier workload with
    # the same prefix in this run directory does not count as this one flowing.
    producer_logs = [_EventTail(Layout.event_log(run_dir, f"{prefix}-p{i}")) for i in range(producers)]
    consumer_logs = [_EventTail(Layout.event_log(run_dir, f"{prefix}-c{i}")) for i in range(consumers)]
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    Layout.workload(run_dir, prefix, ".pid").write_text(str(process.pid))
    _wait_flowing(process, producer_logs, consumer_logs, ready_timeout_s, log)
    return {
        "pid": process.pid,
        "service_url": url,
        "topic": topic,
        "subscription": subscription if consumers > 0 else None,
        # the clients start in the first; a consumer may be moved to any of the others
        "clusters": [cluster, *elsewhere],
        "at": time.time(),
        "run_dir": str(run_dir),
    }


class _EventTail:
    """The lines a client's event log gains from now on, read as they come."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.position = path.stat().st_size if path.exists() else 0
        self.seen: set[str] = set()

    def read(self) -> set[str]:
        """The events logged so far (since this tail began), by name."""
        try:
            with self.path.open("rb") as file:
                file.seek(self.position)
                chunk = file.read()
        except FileNotFoundError:
            return self.seen
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits for the next read
        self.position += len(complete)
        for line in complete.splitlines():
            try:
                self.seen.add(str(json.loads(line).get("event")))
            except ValueError:
                continue
        return self.seen


def _wait_flowing(
    process: subprocess.Popen[bytes],
    producers: list[_EventTail],
    consumers: list[_EventTail],
    timeout_s: float,
    log: Path,
) -> None:
    """Wait until every producer had a send acknowledged and one of the consumers (any: a
    Failover or Exclusive subscription feeds only one) received a message, so the fault that
    follows meets clients that are connected and flowing rather than still starting."""
    started = time.monotonic()
    while True:
        waiting = [t.path.stem for t in producers if "send_ok" not in t.read()]
        if consumers and not any("receive" in t.read() for t in consumers):
            waiting.append(" or ".join(t.path.stem for t in consumers))
        if not waiting:
            return
        if process.poll() is not None:
            raise ActivityFailed(f"workload exited ({process.returncode}) before it flowed{_log_tail(log)}")
        if time.monotonic() - started > timeout_s:
            raise ActivityFailed(
                f"workload {process.pid} not flowing {timeout_s:.0f} s after its start: no first send "
                f"acknowledged or message received by {', '.join(waiting)}{_log_tail(log)}"
            )
        time.sleep(0.05)


def _listener(region: str, cluster_dir: str | None, configuration: dict[str, Any] | None) -> str:
    """The brokers' listener the region's clients look up: a Kubernetes target's brokers
    advertise their pod IPs under one (magnetar.chaos.pods), the DNS names of the default
    listener do not resolve outside the cluster."""
    regions = targets.load(targets.cluster_dir(cluster_dir, configuration)).regions
    return regions.get(region, {}).get("listener_name", "")


def _regions(cluster_dir: str | None, configuration: dict[str, Any] | None) -> dict[str, str]:
    """Service URL of each region of the local cluster (its first broker)."""
    state = targets.load(targets.cluster_dir(cluster_dir, configuration))
    return {name: info["service_url"] for name, info in state.regions.items() if info.get("service_url")}


def stop_workload(
    prefix: str = "w", timeout_s: float = STOP_TIMEOUT_S, configuration: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Stop producing (SIGTERM), let consumers drain what was published, wait for the exit."""
    run_dir = _run_dir(configuration)
    pid_file = Layout.workload(run_dir, prefix, ".pid")
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        raise ActivityFailed(f"no workload {prefix!r} was started in {run_dir}") from None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return {"pid": pid, "already_stopped": True}
    return _wait_exit(pid, time.monotonic() + timeout_s, pid_file.with_suffix(".log"))


def stop_workloads(
    prefixes: list[str], timeout_s: float = STOP_TIMEOUT_S, configuration: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Stop several workloads at once (e.g. one per region): every producer stops at the same
    moment, then every consumer drains, so each subscription runs to the end of what any of
    them published (stopped one after the other, the first one's consumers would miss the
    other's last messages)."""
    run_dir = _run_dir(configuration)
    pids: dict[str, int] = {}
    for prefix in prefixes:
        try:
            pids[prefix] = int(Layout.workload(run_dir, prefix, ".pid").read_text())
        except (OSError, ValueError):
            raise ActivityFailed(f"no workload {prefix!r} was started in {run_dir}") from None
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    logs = {prefix: Layout.workload(run_dir, prefix, ".log") for prefix in pids}
    return {prefix: _wait_exit(pid, deadline, logs[prefix]) for prefix, pid in pids.items()}


def _wait_exit(pid: int, deadline: float, log: Path) -> dict[str, Any]:
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            finished = 0 if Path(f"/proc/{pid}").exists() else pid
        if finished == pid:
            return {"pid": pid, "stopped_at": time.time()}
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    raise ActivityFailed(f"workload {pid} did not drain in time; killed{_log_tail(log)}")


def _log_tail(log: Path, lines: int = 8) -> str:
    """The last lines of the workload's log (its shutdown steps say where it waited)."""
    try:
        tail = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return f"; the end of {log}:\n" + "\n".join(tail)
