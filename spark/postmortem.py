"""The post-mortem of one run directory: every table to Parquet, summary.json and report.html.

Each table is written once and read back from Parquet for the summary and the report (see
tables), so no expensive plan runs twice and the files on disk are exactly what the numbers were
made from.

A small log is analysed differently, not to a different answer: its disruption windows and gaps
are found by sorting it whole (see intervals), which takes fewer Spark jobs than the time slots
that keep a big log from being sorted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from magnetar.common.run_directory import Layout
from magnetar.spark import (
    duplicates,
    latency,
    losses,
    ordering,
    phases,
    receipts,
    report,
    session,
    tables,
    throughput,
    unavailability,
    unseen,
    windows,
)
from magnetar.spark.checkers import verdicts
from magnetar.spark.ingest import read_events
from magnetar.spark.journal import Fault, read_faults
from magnetar.spark.location import Location, Where
from magnetar.spark.runinfo import read_run_info
from magnetar.spark.summary import summarize

TABLES = (
    "windows",
    "duplicates",
    "losses",
    "reorders",
    "findings",
    "unseen",
    "latency",
    "throughput",
    "gaps",
    "bad_lines",
)
#: up to this many lines, a log is sorted whole (see intervals)
SORTED_WHOLE = 1_000_000
#: up to this many lines, Spark is set for little data (see session)
SMALL = 200_000
Status = Callable[[str], None]


@dataclass(frozen=True)
class Result:
    summary: dict[str, Any]
    out: Location

    @property
    def report(self) -> Location:
        return self.out / "report.html"

    @property
    def losses(self) -> int:
        return int(self.summary["headline"]["losses"])


def _quiet(_message: str) -> None:
    pass


Keep = Callable[[str, DataFrame], DataFrame]


def _verdicts(
    events: DataFrame,
    numbered: DataFrame,
    deliveries: DataFrame,
    faults: list[Fault],
    keep: Keep,
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The duplicates, the losses and the checkers' findings, each passed through ``keep`` (given
    its table's name) before what is made from it: the one seam that both ``run`` and ``findings``
    go through, so the checkers judge the same frames either way."""
    duplicate_df = keep("duplicates", duplicates.duplicates(numbered, events))
    loss_df = keep("losses", losses.losses(deliveries))
    finding_df = keep("findings", verdicts.findings(events, numbered, loss_df, duplicate_df, faults))
    return duplicate_df, loss_df, finding_df


def findings(run_dir: Where, spark: SparkSession, *, out: Where | None = None) -> list[dict[str, Any]]:
    """The checkers' findings of ``run_dir`` alone, as findings.parquet's rows (in its order):
    the log read and judged as ``run`` does, without the tables the checkers do not need (windows,
    latency, throughput, the report) or a file written but the staged log (in ``out``, default
    RUN_DIR/report, removed after)."""
    run_dir = Location.of(run_dir)
    out = Location.of(out) if out is not None else run_dir / Layout.REPORT
    info = read_run_info(run_dir)
    faults = read_faults(run_dir) or []
    out.mkdir()
    log = read_events(spark, run_dir, out / "_lines.parquet")
    try:
        with session.sized(spark, log.lines <= SMALL):
            events = log.events
            numbered = receipts.numbered_receives(events)
            acked = receipts.acknowledged(events)
            lives = windows.lifetimes(events)
            finished = losses.finished_subscriptions(spark, lives, acked, info.subscriptions, log.last_ts)
            delivered = receipts.deliveries(acked, receipts.first_receipts(numbered), finished)
            _, _, found = _verdicts(events, numbered, delivered, faults, lambda _name, df: df)
            return [row.asDict(recursive=True) for row in found.collect()]
    finally:
        log.release()


def run(
    run_dir: Where,
    spark: SparkSession,
    *,
    threshold_ms: float = 50.0,
    out: Where | None = None,
    status: Status = _quiet,
    html: bool = True,
) -> Result:
    """Analyse ``run_dir`` (a path or a URI, see location) into ``out`` (default RUN_DIR/report);
    raises BadInputError for input that cannot be analysed."""
    run_dir = Location.of(run_dir)
    out = Location.of(out) if out is not None else run_dir / Layout.REPORT
    status(f"reading {run_dir}")
    info = read_run_info(run_dir)
    found = read_faults(run_dir)
    faults = found or []
    out.mkdir()
    log = read_events(spark, run_dir, out / "_lines.parquet")
    small = log.lines <= SMALL
    # a small log: sorted whole (see intervals), and Spark set for little data (see session)
    slotted = log.lines > SORTED_WHOLE
    with session.sized(spark, small):
        events = log.events

        def save(name: str, frame: DataFrame) -> Location:
            path = out / f"{name}.parquet"
            tables.write(frame, path)
            return path

        def saved(name: str, frame: DataFrame) -> DataFrame:
            return tables.frame(spark, save(name, frame), frame.schema)

        status(f"{log.lines:,} lines in {log.files} files, {log.bad:,} bad; {len(faults)} faults")
        bad_lines = saved("bad_lines", log.bad_lines)
        # used by several tables: computed once, kept while this run is analysed
        numbered = receipts.numbered_receives(events).persist(StorageLevel.MEMORY_AND_DISK)
        firsts = receipts.first_receipts(numbered)
        acked = receipts.acknowledged(events)
        lives = windows.lifetimes(events).persist(StorageLevel.MEMORY_AND_DISK)
        finished = losses.finished_subscriptions(spark, lives, acked, info.subscriptions, log.last_ts)
        delivered = receipts.deliveries(acked, firsts, finished).persist(StorageLevel.MEMORY_AND_DISK)

        status("disruption windows")
        available = windows.availability_steps(delivered).persist(StorageLevel.MEMORY_AND_DISK)
        disrupted = windows.disruption_windows(
            events, lives, available, faults, threshold_ms, slotted=slotted
        )
        window_rows = tables.rows(save("windows", disrupted))
        gaps = unavailability.gaps(events, faults, int(threshold_ms * 1_000_000), slotted=slotted)
        gap_rows = tables.rows(save("gaps", gaps), ["fault", "gap_ms"])

        status("duplicates, losses, reorders, checkers")
        verdict = _verdicts(events, numbered, delivered, faults, saved)
        duplicate_df, loss_df, finding_df = verdict
        reorder_df = saved("reorders", ordering.reorders(firsts))
        unseen_rows = tables.rows(save("unseen", unseen.unseen(delivered)))

        status("latency and throughput")
        impact: dict[str, int] = {}
        for w in window_rows:
            impact[w["fault"]] = max(w["end"], impact.get(w["fault"], w["end"]))
        cuts = phases.phases(faults, impact)
        latency_rows = tables.rows(save("latency", latency.latency(spark, events, cuts)))
        throughput_rows = tables.rows(save("throughput", throughput.throughput(events)))

        status("summary")
        summary = summarize(
            run=info.id,
            run_dir=str(run_dir),
            threshold_ms=threshold_ms,
            files=log.files,
            lines=log.lines,
            events=log.valid,
            journal_found=found is not None,
            faults=faults,
            windows=window_rows,
            gaps=gap_rows,
            duplicates=duplicate_df,
            losses=loss_df,
            reorders=reorder_df,
            findings=finding_df,
            latency=latency_rows,
            bad_lines=bad_lines,
            bad=log.bad,
        )
        (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        if html:
            status("report.html")
            details = report.Details.collect(
                throughput_rows, window_rows, duplicate_df, loss_df, bad_lines, finding_df, unseen_rows
            )
            (out / "report.html").write_text(report.render(summary, faults, details))
        for cached in (numbered, delivered, available, lives):
            cached.unpersist()
        log.release()
    return Result(summary, out)
