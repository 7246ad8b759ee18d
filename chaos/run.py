"""One chaos-lab run: an experiment executed by Chaos Toolkit, and everything it leaves behind
gathered in ``runs/<run id>/`` (architecture §6; the layout is ``magnetar.common.run_directory``'s):

    runs/<run id>/experiment.json   the experiment as run (with the configuration we injected)
    runs/<run id>/journal.json      Chaos Toolkit's journal: every activity's start, end, output
    runs/<run id>/events/*.jsonl    the workload's event log
    runs/<run id>/cluster/          the cluster's process logs and state at the end of the run
    runs/<run id>/run.json          the run's id, its workloads' clusters and subscriptions
    runs/<run id>/report/           the post-mortem, once it has run
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chaoslib.exceptions import ChaosException, InvalidExperiment
from chaoslib.experiment import ensure_experiment_is_valid, run_experiment
from chaoslib.loader import load_experiment

from magnetar.chaos.pods import is_kube
from magnetar.chaos.workload.actions import start_workload
from magnetar.common.run_directory import (
    RUNS,
    WORKLOAD_MODULES,
    ExpectedSubscription,
    Layout,
    RunInfo,
    make_run_dir,
    write_run_info,
)

log = logging.getLogger(__name__)


class ExperimentError(ValueError):
    """The experiment file cannot be run; the message says why, in the user's terms."""


@dataclass(frozen=True)
class Target:
    """Where the faults go: a local cluster directory, or service/admin URLs of any cluster."""

    kind: str = "local"
    cluster_dir: Path | None = None
    service_url: str | None = None
    admin_url: str | None = None


def load(path: Path) -> dict[str, Any]:
    """Load and validate with Chaos Toolkit, turning its errors into one clear message."""
    if not path.exists():
        raise ExperimentError(f"experiment file {path} does not exist")
    try:
        experiment: dict[str, Any] = load_experiment(str(path))
    except (InvalidExperiment, ChaosException) as exc:
        raise ExperimentError(f"{path}: {exc}") from exc
    try:
        ensure_experiment_is_valid(experiment)
    except ChaosException as exc:
        raise ExperimentError(f"{path} is not a valid experiment: {exc}") from exc
    return experiment


def new_run_dir(experiment_path: Path, run_id: str | None = None) -> Path:
    """``runs/<run id>/``, made; ``run_id`` defaults to ``<experiment>-<time>``. A directory that
    already holds a run's events is refused (RunDirectoryExistsError, a FileExistsError)."""
    run_id = run_id or f"{experiment_path.stem}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    return make_run_dir(RUNS / run_id, new=True)


def configure(experiment: dict[str, Any], run_dir: Path, target: Target) -> dict[str, Any]:
    """Tell the activities where the run and the cluster are (experiment configuration keys)."""
    configuration = dict(experiment.get("configuration") or {})
    configuration["magnetar_run_dir"] = str(run_dir.resolve())
    configuration["magnetar_target"] = target.kind
    if target.cluster_dir is not None:
        configuration["magnetar_cluster_dir"] = str(target.cluster_dir.resolve())
        state = target.cluster_dir / "state.json"
        if is_kube(target.cluster_dir):
            from magnetar.chaos.pods import target as pod_target  # the operator's and Kubernetes' modules

            regions = list(pod_target.live_state(target.cluster_dir).regions)
            if regions:
                configuration.setdefault("magnetar_cluster_name", regions[0])
        elif state.exists():
            regions = list(json.loads(state.read_text()).get("regions", {}))
            if regions:
                configuration.setdefault("magnetar_cluster_name", regions[0])
    if target.service_url:
        configuration["magnetar_service_url"] = target.service_url
    if target.admin_url:
        configuration["magnetar_admin_url"] = target.admin_url
    return {**experiment, "configuration": configuration}


def execute(experiment: dict[str, Any], run_dir: Path, target: Target) -> dict[str, Any]:
    """Run the experiment; write experiment.json, journal.json, run.json and the cluster's logs."""
    experiment = configure(experiment, run_dir, target)
    (run_dir / Layout.EXPERIMENT).write_text(json.dumps(experiment, indent=2, default=str))
    journal: dict[str, Any] = run_experiment(experiment)
    (run_dir / Layout.JOURNAL).write_text(json.dumps(journal, indent=2, default=str))
    write_run_info(run_dir, run_info(run_dir, journal))
    if target.cluster_dir is not None and is_kube(target.cluster_dir):
        from magnetar.chaos.pods import target as pod_target

        pod_target.pod_logs(target.cluster_dir, run_dir / Layout.CLUSTER)
    elif target.cluster_dir is not None:
        collect_cluster_logs(target.cluster_dir, run_dir / Layout.CLUSTER)
    return journal


def run_info(run_dir: Path, journal: dict[str, Any]) -> RunInfo:
    """What ``run.json`` says of a run, from the workloads its journal shows started: the run's id
    (its directory's name, as in the event log), the clusters their clients talked to, and the
    subscriptions they consumed on, each in the order the workloads started."""
    clusters: list[str] = []
    subscriptions: list[ExpectedSubscription] = []
    for started in _started_workloads(journal):
        for name in started.get("clusters") or []:
            if name not in clusters:
                clusters.append(name)
        if started.get("subscription"):
            expected = ExpectedSubscription(topic=started["topic"], subscription=started["subscription"])
            if expected not in subscriptions:
                subscriptions.append(expected)
    return RunInfo(id=run_dir.name, clusters=clusters, subscriptions=subscriptions)


def _started_workloads(journal: dict[str, Any]) -> list[dict[str, Any]]:
    """The outputs of the journal's workload starts that succeeded, in order."""
    found = []
    for entry in [*(journal.get("run") or []), *(journal.get("rollbacks") or [])]:
        provider = (entry.get("activity") or {}).get("provider") or {}
        if (
            provider.get("module") in WORKLOAD_MODULES
            and provider.get("func") == start_workload.__name__
            and entry.get("status") == "succeeded"
            and isinstance(entry.get("output"), dict)
        ):
            found.append(entry["output"])
    return found


def collect_cluster_logs(cluster_dir: Path, destination: Path) -> None:
    destination.mkdir(parents=True, exist_ok=True)
    for item in [*cluster_dir.glob("*.log"), cluster_dir / "state.json"]:
        if item.exists():
            shutil.copy2(item, destination / item.name)


def summary(journal: dict[str, Any]) -> dict[str, Any]:
    """The one-screen view: status, hypothesis before/after, every activity."""
    steady = journal.get("steady_states") or {}
    activities = [
        {
            "name": run["activity"].get("name"),
            "type": run["activity"].get("type"),
            "status": run.get("status"),
            "duration_s": run.get("duration"),
            "error": run.get("exception") and "".join(run["exception"][-1:]).strip(),
        }
        for run in [*journal.get("run", []), *journal.get("rollbacks", [])]
    ]
    return {
        "status": journal.get("status"),
        "deviated": journal.get("deviated"),
        "hypothesis_before": (steady.get("before") or {}).get("steady_state_met"),
        "hypothesis_after": (steady.get("after") or {}).get("steady_state_met"),
        "activities": activities,
        "duration_s": journal.get("duration"),
    }
