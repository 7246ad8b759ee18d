"""Start and stop the workload in the background of an experiment.

The workload runs as its own process (``magnetar workload``) writing the run's event log, so a
fault in the cluster never stops the record of what clients saw. Against a secured cluster its
clients authenticate (``admin_target.auth_settings``: the experiment's credentials, or the local
cluster's super-user token).
"""

from __future__ import annotations

import contextlib
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
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Start producers and consumers (official client) that log every send, receipt, receive and
    ack to ``runs/<id>/events/``; they run until ``stop_workload`` (or ``duration`` seconds).
    With ``region``, the clients start in that region of a multi-region local cluster and know
    the others (``move_consumers`` sends the consumers there). With ``partitions``, the topic is
    created partitioned first. What it returns (in the journal) names the workload's topic, its
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
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    Layout.workload(run_dir, prefix, ".pid").write_text(str(process.pid))
    time.sleep(2)  # connected and flowing before the fault
    if process.poll() is not None:
        raise ActivityFailed(f"workload exited at once ({process.returncode}); see {log}")
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
