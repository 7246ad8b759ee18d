"""The run directory and its event log (architecture §6): the contract between the chaos lab, which
writes a run, and the post-mortem, which reads it. Neither owns it; both import it from here.

- the event log's names and version: ``EVENTS``, ``SCHEMA_VERSION``, ``READABLE_VERSIONS``, and
  how a payload is digested (``payload_digest``);
- the layout: ``Layout``, the names of what a run directory holds, and ``RUNS``, the default
  parent of run directories;
- the making of a run directory: ``make_run_dir``;
- the journal's workload actions: ``WORKLOAD_MODULES``, the provider modules whose actions frame
  a run rather than disturb it (the post-mortem leaves them out of the faults);
- ``run.json``: ``RunInfo``, written by ``write_run_info`` at the end of every ``magnetar chaos
  run`` and read by ``read_run_info``.

Only the standard library and pydantic: the workload, the lab and Spark's driver all load it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Final, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: major version of the event schema the workload writes; a line without ``v`` is version 1, and a
#: reader refuses a major it does not know. Version 2 adds the events ``seek`` and ``nack`` (a
#: version-1 reader would count them as bad lines) and the fields ``sub_type``, ``digest`` and
#: ``redelivery``, without which the post-mortem's checkers cannot tell a subscription's ordering
#: promise, a payload's identity or an explained redelivery
SCHEMA_VERSION: Final = 2
#: the majors a reader of this contract understands: every version-2 line reads as version 1
#: plus optional fields and events, so old logs still parse
READABLE_VERSIONS: Final = (1, 2)
#: the values of an event line's ``event``
EVENTS: Final = (
    "send",
    "send_ok",
    "send_err",
    "receive",
    "ack",
    "connect",
    "disconnect",
    "switch_cluster",
    "seek",
    "nack",
)
#: the subscription types a consumer event's ``sub_type`` names (the Pulsar client's names)
SUBSCRIPTION_TYPES: Final = ("Exclusive", "Failover", "Shared", "KeyShared")
#: how many hex digits of a payload's SHA-256 the event log keeps: enough that two payloads of a
#: run never share one by chance, short enough to keep the lines small
DIGEST_HEX: Final = 16

#: where run directories are made when nobody names one (relative to the working directory)
RUNS: Final = Path("runs")

#: the module of the workload's own actions (start and stop), as a Chaos Toolkit journal's
#: ``activity.provider.module`` names it
WORKLOAD_ACTIONS_MODULE: Final = "magnetar.chaos.workload.actions"
#: the provider modules whose actions are the workload's, not faults
WORKLOAD_MODULES: Final = frozenset({WORKLOAD_ACTIONS_MODULE})


def payload_digest(payload: bytes) -> str:
    """The event log's ``digest`` of a message's payload: the writer and any checker of a log
    must agree on it, so it lives in the contract."""
    return hashlib.sha256(payload).hexdigest()[:DIGEST_HEX]


class Layout:
    """The names inside a run directory, joined onto it (``run_dir / Layout.JOURNAL`` works for a
    ``Path`` and for the post-mortem's locations alike)::

        events/<client>.jsonl               the event log, one file per client
        workload/<prefix>.log|.pid|.json    a workload process's log, pid and final counters
        control/<client>.json               {"cluster": NAME} tells that consumer to move region
        cluster/                            the cluster's logs and state at the end of the run
        report/                             the post-mortem
        kube-target/                        with --kube: what the faults act on
        experiment.json                     the experiment as run
        journal.json                        Chaos Toolkit's journal
        chaos-summary.json                  the run's one-screen summary
        run.json                            RunInfo
    """

    EVENTS: Final = "events"
    WORKLOAD: Final = "workload"
    CONTROL: Final = "control"
    CLUSTER: Final = "cluster"
    REPORT: Final = "report"
    KUBE_TARGET: Final = "kube-target"
    EXPERIMENT: Final = "experiment.json"
    JOURNAL: Final = "journal.json"
    CHAOS_SUMMARY: Final = "chaos-summary.json"
    RUN_INFO: Final = "run.json"
    #: the suffix of an event log in ``events/``
    EVENT_LOG_SUFFIX: Final = ".jsonl"

    @staticmethod
    def event_log(run_dir: Path, client: str) -> Path:
        return run_dir / Layout.EVENTS / f"{client}{Layout.EVENT_LOG_SUFFIX}"

    @staticmethod
    def control(run_dir: Path, client: str) -> Path:
        return run_dir / Layout.CONTROL / f"{client}.json"

    @staticmethod
    def workload(run_dir: Path, prefix: str, suffix: str) -> Path:
        """``workload/<prefix><suffix>``: ``.log``, ``.pid`` or ``.json``."""
        return run_dir / Layout.WORKLOAD / f"{prefix}{suffix}"


class RunDirectoryExistsError(FileExistsError):
    """A new run was given the directory of another."""


def make_run_dir(path: Path, *, new: bool = False) -> Path:
    """Make the run directory ``path`` (and its parents) with its ``events/``; ``path``.

    With ``new`` it must not hold an event log already (RunDirectoryExistsError): a run never
    writes into another's. Without, an existing one is used as it is (every activity of one run
    asks for it)."""
    events = path / Layout.EVENTS
    try:
        events.mkdir(parents=True, exist_ok=not new)
    except FileExistsError:
        raise RunDirectoryExistsError(
            f"run directory {path} exists already (it has {Layout.EVENTS}/): give the run another id"
        ) from None
    return path


class ExpectedSubscription(BaseModel):
    """A subscription meant to run to the end of the run: every message acknowledged on its topic
    after it first appears is expected, even if it never logged anything."""

    model_config = ConfigDict(extra="forbid")
    topic: str = Field(min_length=1)
    subscription: str = Field(min_length=1)


class RunInfo(BaseModel):
    """``run.json``: the run's id (its directory's name, the event log's ``run``), the cluster
    names its workloads talked to (the event log's ``cluster``), and the subscriptions its
    workloads consumed on. A reader keeps keys it does not know."""

    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1)
    clusters: list[str] = []
    subscriptions: list[ExpectedSubscription] = []


class RunInfoError(ValueError):
    """``run.json`` is not valid run metadata; the message names the file and what is wrong."""


def write_run_info(run_dir: Path, info: RunInfo) -> Path:
    """Write ``run_dir/run.json`` (whole or not at all); its path."""
    path = run_dir / Layout.RUN_INFO
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(info.model_dump_json(indent=2) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def parse_run_info(text: str, where: str) -> RunInfo:
    """``run.json``'s text as RunInfo; RunInfoError naming ``where`` and every fault."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise RunInfoError(f"{where}: not valid run metadata: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise RunInfoError(
            f"{where}: not valid run metadata: a JSON object is needed, not {type(document).__name__}"
        )
    try:
        return RunInfo.model_validate(document)
    except ValidationError as exc:
        faults = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
        )
        raise RunInfoError(f"{where}: not valid run metadata: {faults}") from None


class Place(Protocol):
    """A run directory or a file in it: a ``Path``, or anything else that joins, tells whether it
    exists and reads text the same way (the post-mortem's locations, which may be URIs)."""

    @property
    def name(self) -> str: ...

    def __truediv__(self, name: str) -> Place: ...

    def exists(self) -> bool: ...

    def read_text(self) -> str: ...


def read_run_info(run_dir: Place) -> RunInfo:
    """``run_dir/run.json``; without it, a RunInfo with the directory's name for id and nothing
    listed. RunInfoError if the file is unreadable or not valid."""
    path = run_dir / Layout.RUN_INFO
    if not path.exists():
        return RunInfo(id=run_dir.name)
    try:
        text = path.read_text(encoding="utf-8") if isinstance(path, Path) else path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunInfoError(f"{path}: not readable ({exc})") from None
    return parse_run_info(text, str(path))
