"""``magnetar chaos compare``: the same experiments on a local Magnetar cluster and on Apache
Pulsar's own processes, one verdict table system beside system.

For each experiment and each system, a cluster of the topology the experiment needs is started
under ``runs/<compare id>/clusters/``, the experiment runs through the code ``magnetar chaos run``
uses (its run directory is ``runs/<compare id>-<experiment>-<system>/``), and the cluster is
stopped. Then one post-mortem (Spark) reads every run directory, and the table's figures come from
each run's ``report/summary.json``. The table is written to ``runs/<compare id>/compare.json``.

An experiment whose faults Pulsar's processes cannot take (two regions linked by Magnetar's
proxies, say) gets a "not supported" row with the reason instead of a run.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from magnetar.chaos import run as chaos_run
from magnetar.common.run_directory import RUNS, Layout

Say = Callable[[str], None]

#: the systems a comparison runs, in the table's order
MAGNETAR = "magnetar"
PULSAR = "pulsar"
#: what ``--against`` accepts: the other system of the comparison
AGAINST = (PULSAR,)

#: providers whose faults need what only a local Magnetar cluster has, and why
PULSAR_UNSUPPORTED = {
    "region_outage": "needs two regions; the Pulsar launcher starts one cluster",
    "restore_region": "needs two regions; the Pulsar launcher starts one cluster",
    "partition_regions": "cuts Magnetar's link proxies between regions; Pulsar's launcher has none",
    "heal_partition": "heals Magnetar's link proxies between regions; Pulsar's launcher has none",
    "move_consumers": "moves consumers to another region; the Pulsar launcher starts one cluster",
}
#: providers that run on Pulsar's processes but see less there than on Magnetar's, and what
PULSAR_CAVEATS = {
    "wait_for_full_replication": "re-replication not followed: the probe reads Magnetar's "
    "under-replication marks, not BookKeeper's",
}
#: arguments of the lab's activities that name a region
_REGION_ARGUMENTS = ("region", "regions", "from_regions", "to_region", "cluster", "clusters")
#: the region a comparison's cluster is, where the experiment names none (the shipped
#: experiments name jp-east, as examples/one-region.yaml)
DEFAULT_REGION = "jp-east"


class CompareError(ValueError):
    """The comparison cannot start; the message says why, in the user's terms."""


@dataclass(frozen=True)
class Topology:
    """The cluster an experiment runs on, the same for both systems."""

    regions: tuple[str, ...] = (DEFAULT_REGION,)
    brokers: int = 2
    bookies: int = 2
    #: ensemble size, write quorum, ack quorum
    ledger: tuple[int, int, int] = (2, 2, 2)

    def describe(self) -> str:
        e, qw, qa = self.ledger
        where = f"{len(self.regions)} regions, each " if len(self.regions) > 1 else ""
        return f"{where}{self.brokers} brokers, {self.bookies} bookies, E/Qw/Qa {e}/{qw}/{qa}"


#: a bookie lost out of two would leave a 2/2/2 ledger no ensemble to change to
_MORE_BOOKIES = {"kill_bookie", "stop_bookie"}

#: as examples/one-region.yaml: short timeouts so faults are handled within seconds (Magnetar's names)
MAGNETAR_BOOKIE: dict[str, Any] = {"zk_timeout": 4000, "lost_bookie_recovery_delay": 5}
MAGNETAR_BROKER: dict[str, Any] = {"metadata_store_session_timeout_millis": 5000}
#: the same in Pulsar's names; Pulsar's bookies run the auditor and the replication workers in
#: themselves as Magnetar's do (BookKeeper leaves that off by default)
PULSAR_BOOKIE: dict[str, object] = {
    "zkTimeout": 4000,
    "lostBookieRecoveryDelay": 5,
    "autoRecoveryDaemonEnabled": "true",
}
PULSAR_BROKER: dict[str, object] = {"metadataStoreSessionTimeoutMillis": 5000}


@dataclass(frozen=True)
class Planned:
    """One experiment of a comparison, loaded and checked."""

    name: str
    path: Path
    experiment: dict[str, Any]
    topology: Topology
    #: why Pulsar's processes cannot take its faults; empty: they can
    pulsar_unsupported: str = ""


@dataclass
class Row:
    """One line of the table: an experiment on one system."""

    experiment: str
    system: str
    #: "ran", "not supported", "failed" (the cluster or the run), or "not analysed"
    status: str
    reason: str = ""
    run_dir: str = ""
    #: the journal's status (completed, failed, aborted, interrupted)
    journal: str = ""
    lost: int | None = None
    duplicates: int | None = None
    skips: int | None = None
    reorders: int | None = None
    longest_window_ms: float | None = None
    p99_lateness_ms: float | None = None
    topology: str = ""


@dataclass
class Comparison:
    compare_id: str
    against: str
    directory: Path
    rows: list[Row] = field(default_factory=list)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    started_at: str = ""
    ended_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "compare_id": self.compare_id,
            "against": self.against,
            "systems": [MAGNETAR, self.against],
            "pulsar_version": _pulsar_version(),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "cpus": os.cpu_count(),
            "load_before": list(self.load_before),
            "load_after": list(self.load_after),
            "rows": [asdict(row) for row in self.rows],
        }


def plan(names: tuple[str, ...], experiments_dir: Path) -> list[Planned]:
    """Each of ``names`` (a name under ``experiments_dir`` or an experiment file), loaded; a name
    that is neither, or a file that is not a valid experiment, is a CompareError."""
    if not names:
        raise CompareError("name at least one experiment (e.g. bundle-unload)")
    planned: list[Planned] = []
    for name in names:
        path = Path(name)
        if not (path.suffix in (".yaml", ".yml", ".json") and path.exists()):
            path = experiments_dir / f"{name}.yaml"
            if not path.exists():
                known = ", ".join(sorted(p.stem for p in experiments_dir.glob("*.yaml")))
                raise CompareError(f"no experiment {name!r}: neither a file nor one of {known}")
        try:
            experiment = chaos_run.load(path)
        except chaos_run.ExperimentError as exc:
            raise CompareError(str(exc)) from exc
        if any(p.name == path.stem for p in planned):
            raise CompareError(f"experiment {path.stem!r} named twice")
        planned.append(
            Planned(path.stem, path, experiment, topology(experiment), pulsar_unsupported(experiment))
        )
    return planned


def _providers(experiment: dict[str, Any]) -> Iterator[dict[str, Any]]:
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    for activity in [
        *(hypothesis.get("probes") or []),
        *(experiment.get("method") or []),
        *(experiment.get("rollbacks") or []),
    ]:
        provider = activity.get("provider") or {}
        if provider.get("type") == "python":
            yield provider


def topology(experiment: dict[str, Any]) -> Topology:
    """The regions the experiment's activities name, two brokers and two bookies each (three
    bookies where one is lost, so writers have one to replace it with), ledgers 2/2/2."""
    regions: list[str] = []
    bookies = 2
    for provider in _providers(experiment):
        arguments = provider.get("arguments") or {}
        for key in _REGION_ARGUMENTS:
            value = arguments.get(key)
            for region in [value] if isinstance(value, str) else (value or []):
                if isinstance(region, str) and region not in regions:
                    regions.append(region)
        if provider.get("func") in _MORE_BOOKIES:
            bookies = 3
    return Topology(regions=tuple(regions) or (DEFAULT_REGION,), bookies=bookies)


def pulsar_unsupported(experiment: dict[str, Any]) -> str:
    """Why Apache Pulsar's processes cannot take the experiment's faults; empty if they can."""
    for provider in _providers(experiment):
        reason = PULSAR_UNSUPPORTED.get(str(provider.get("func")))
        if reason:
            return f"{provider.get('func')}: {reason}"
    regions = topology(experiment).regions
    if len(regions) > 1:
        return f"names {len(regions)} regions ({', '.join(regions)}); the Pulsar launcher starts one cluster"
    return ""


def new_comparison(against: str, compare_id: str | None = None) -> Comparison:
    """``runs/<compare id>/``, made; the id defaults to ``compare-<time>``."""
    if against not in AGAINST:
        raise CompareError(f"cannot compare against {against!r}: only {', '.join(AGAINST)}")
    compare_id = compare_id or f"compare-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    directory = RUNS / compare_id
    if (directory / "compare.json").exists():
        raise CompareError(f"{directory} already holds a comparison; give another --compare-id")
    directory.mkdir(parents=True, exist_ok=True)
    return Comparison(compare_id, against, directory)


def run(planned: list[Planned], comparison: Comparison, say: Say, *, postmortem: bool = True) -> Comparison:
    """Run every experiment on each system in turn, then the post-mortem of every run; the
    comparison with its rows, also written to compare.json."""
    comparison.started_at = datetime.now(UTC).isoformat(timespec="seconds")
    comparison.load_before = os.getloadavg()
    total = len(planned) * 2
    step = 0
    for item in planned:
        for system in (MAGNETAR, comparison.against):
            step += 1
            say(f"[{step}/{total}] {item.name} on {system_title(system)} ({item.topology.describe()})")
            comparison.rows.append(_run_on(item, system, comparison, say))
            write(comparison)
    ran = [Path(r.run_dir) for r in comparison.rows if r.status == "ran" and r.run_dir]
    if postmortem and ran:
        say(f"post-mortem of {len(ran)} runs (Spark)")
        _postmortem(ran, say)
    for row in comparison.rows:
        if row.status == "ran" and row.run_dir:
            fill(row, Path(row.run_dir))
    comparison.ended_at = datetime.now(UTC).isoformat(timespec="seconds")
    comparison.load_after = os.getloadavg()
    write(comparison)
    return comparison


def system_title(system: str) -> str:
    return "Magnetar" if system == MAGNETAR else f"Apache Pulsar {_pulsar_version()}"


def _pulsar_version() -> str:
    from magnetar.chaos.apache_pulsar.processes import VERSION

    return VERSION


def _run_on(item: Planned, system: str, comparison: Comparison, say: Say) -> Row:
    row = Row(item.name, system, "ran", topology=item.topology.describe())
    if system == PULSAR and item.pulsar_unsupported:
        row.status, row.reason = "not supported", item.pulsar_unsupported
        say(f"  not supported on {system_title(system)}: {item.pulsar_unsupported}")
        return row
    cluster_dir = comparison.directory / "clusters" / f"{item.name}-{system}"
    try:
        run_dir = chaos_run.new_run_dir(item.path, f"{comparison.compare_id}-{item.name}-{system}")
    except FileExistsError as exc:
        row.status, row.reason = "failed", str(exc)
        return row
    row.run_dir = str(run_dir)
    starter = _magnetar_cluster if system == MAGNETAR else _pulsar_cluster
    try:
        with starter(cluster_dir, item.topology, say):
            say(f"  running {item.name} → {run_dir}")
            journal = chaos_run.execute(item.experiment, run_dir, chaos_run.Target("local", cluster_dir))
            say("  stopping the cluster")
    except Exception as exc:  # a cluster that does not start is a row, not the end of the comparison
        row.status, row.reason = "failed", f"{type(exc).__name__}: {_first_line(exc)}"
        say(f"  failed: {row.reason}")
        return row
    if system == PULSAR:
        funcs = {str(p.get("func")) for p in _providers(item.experiment)}
        row.reason = "; ".join(note for func, note in PULSAR_CAVEATS.items() if func in funcs)
    summary = chaos_run.summary(journal)
    (run_dir / Layout.CHAOS_SUMMARY).write_text(json.dumps(summary, indent=2, default=str))
    row.journal = str(summary["status"])
    failed = [a for a in summary["activities"] if a["status"] == "failed"]
    if failed:
        failure = f"{failed[0]['name']} failed: {_first_line(failed[0]['error'] or '')}"
        row.reason = "; ".join(r for r in (failure, row.reason) if r)
    say(f"  {row.journal}{f' ({row.reason})' if row.reason else ''}")
    return row


def _first_line(text: object) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


@contextlib.contextmanager
def _magnetar_cluster(directory: Path, topology: Topology, say: Say) -> Iterator[None]:
    from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
    from magnetar.local.supervisor import Supervisor

    e, qw, qa = topology.ledger
    spec = ClusterSpec(
        name="compare",
        regions=[
            RegionSpec(
                name=region,
                brokers=topology.brokers,
                bookies=topology.bookies,
                ledger=LedgerSpec(ensemble_size=e, write_quorum=qw, ack_quorum=qa),
                bookie_settings=MAGNETAR_BOOKIE,
                broker_settings=MAGNETAR_BROKER,
            )
            for region in topology.regions
        ],
    )
    supervisor = Supervisor(directory, on_status=lambda message: say(f"  {message}"))
    try:
        supervisor.up(spec)
        yield
    finally:
        supervisor.down()


@contextlib.contextmanager
def _pulsar_cluster(directory: Path, topology: Topology, say: Say) -> Iterator[None]:
    from magnetar.chaos.apache_pulsar.processes import ApachePulsar

    pulsar = ApachePulsar(
        directory,
        bookies=topology.bookies,
        ledger=topology.ledger,
        bookie_settings=PULSAR_BOOKIE,
        broker_settings=PULSAR_BROKER,
    )
    with pulsar:
        say(f"  starting Apache Pulsar {_pulsar_version()} in {directory}")
        pulsar.cluster(brokers=topology.brokers, cluster_name=topology.regions[0])
        yield


def _postmortem(run_dirs: list[Path], say: Say) -> None:
    """``magnetar postmortem`` of every run in one Spark session; its output shows as it goes.
    Its exit status says whether a run lost a message, which the table says by itself."""
    logged = [d for d in run_dirs if any((d / Layout.EVENTS).glob(f"*{Layout.EVENT_LOG_SUFFIX}"))]
    if not logged:
        return
    command = [sys.executable, "-m", "magnetar", "postmortem", *map(str, logged)]
    status = subprocess.run(command, check=False).returncode
    if status not in (0, 3):  # 3: a run lost an acknowledged message, a verdict and not a failure
        say(f"post-mortem exited with {status}")


def fill(row: Row, run_dir: Path) -> None:
    """The row's figures from the run's report/summary.json; "not analysed" without one."""
    try:
        summary = json.loads((run_dir / Layout.REPORT / "summary.json").read_text())
    except (OSError, ValueError):
        row.status = "not analysed"
        row.reason = row.reason or f"no post-mortem summary in {run_dir / Layout.REPORT}"
        return
    figures = verdicts(summary)
    for key, value in figures.items():
        setattr(row, key, value)


def verdicts(summary: dict[str, Any]) -> dict[str, Any]:
    """The table's figures of one post-mortem summary: the checkers' counts (lost writes,
    duplicates, poll skips, nonmonotonic polls as reorders), the longest disruption window, and
    the worst p99 of end-to-end lateness (receipt time minus the producer's timestamp) while a
    fault was on (the whole run's where no phase is marked during a fault)."""
    headline = summary["headline"]
    latency = [r for r in summary.get("latency") or [] if r.get("measure") == "end_to_end"]
    during = [r for r in latency if r.get("phase") == "during"] or latency
    p99 = max((float(r["p99_ms"]) for r in during if r.get("p99_ms") is not None), default=None)
    return {
        "lost": int(headline["checker_lost_write"]),
        "duplicates": int(headline["checker_duplicate"]),
        "skips": int(headline["checker_poll_skip"]),
        "reorders": int(headline["checker_nonmonotonic_poll"]),
        "longest_window_ms": float(headline["window_max_ms"] or 0.0),
        "p99_lateness_ms": p99,
    }


def write(comparison: Comparison) -> Path:
    path = comparison.directory / "compare.json"
    path.write_text(json.dumps(comparison.to_json(), indent=2))
    return path


def table(comparison: Comparison) -> Table:
    """Experiment × system: the verdicts, or why there are none."""
    title = f"{comparison.compare_id}: Magnetar beside {system_title(comparison.against)}"
    rendered = Table(
        "experiment", "system", "lost", "duplicates", "skips", "reorders", "longest window",
        "p99 lateness", "note", title=title,
    )  # fmt: skip
    for row in comparison.rows:
        figures = [_count(row.lost), _count(row.duplicates), _count(row.skips), _count(row.reorders),
                   _ms(row.longest_window_ms), _ms(row.p99_lateness_ms)]  # fmt: skip
        note = row.reason if row.status == "ran" else f"{row.status}: {row.reason}"
        if row.status == "ran" and row.journal and row.journal != "completed":
            note = f"experiment {row.journal}" + (f": {row.reason}" if row.reason else "")
        rendered.add_row(row.experiment, system_title(row.system), *figures, note)
    return rendered


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"
