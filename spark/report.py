"""report.html: one standalone page (inline CSS, charts as base64 PNG) a person can read."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from magnetar.spark import charts
from magnetar.spark.checkers.verdicts import NAMES as CHECKERS
from magnetar.spark.journal import Fault
from magnetar.spark.summary import headline_key

#: at most this many topics get a timeline, and this many rows a table
TOPICS, ROWS = 8, 25
#: the findings table lists at most this many of each checker (the first ones)
PER_CHECKER = 10
#: what a finding of each checker means, for the report's table of checkers
MEANINGS = {
    "lost-write": "acknowledged to its producer, never received by a subscription that ran to the end",
    "duplicate": "received more than once by one subscription",
    "poll-skip": "an ordered subscription delivered past messages still due before it",
    "nonmonotonic-poll": "a consumer went back in an ordered stream with no seek or redelivery to explain it",
    "inconsistent-offsets": "one message with two payloads, or one message id with two messages",
}

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1180px;
 color:#1f2328;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;
 padding-bottom:4px}
.sub{color:#59636e;margin-bottom:16px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(165px,1fr));gap:10px}
.card{border:1px solid #d0d7de;border-radius:8px;padding:10px 12px;background:#f6f8fa}
.card .v{font-size:22px;font-weight:600}.card .k{color:#59636e;font-size:12px}
.card.bad{background:#ffebe9;border-color:#ff8182}.card.good{background:#dafbe1;border-color:#4ac26b}
table{border-collapse:collapse;width:100%;margin:6px 0 4px;font-size:13px}
th,td{border-bottom:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f6f8fa;padding:1px 4px;
 border-radius:4px}
img{max-width:100%;border:1px solid #d0d7de;border-radius:6px;margin:6px 0}
.muted{color:#59636e}.pos{color:#cf222e}.neg{color:#1a7f37}
"""


@dataclass(frozen=True)
class Details:
    throughput: dict[str, list[dict[str, Any]]]
    windows: list[dict[str, Any]]
    longest: list[dict[str, Any]]
    duplicates: list[dict[str, Any]]
    losses: list[dict[str, Any]]
    bad_lines: list[dict[str, Any]]
    #: the first findings of each checker, in time order
    findings: list[dict[str, Any]]
    #: (topic, subscription) -> its unseen-message counts per second
    unseen: dict[tuple[str, str], list[dict[str, Any]]]

    @staticmethod
    def collect(
        throughput: Sequence[dict[str, Any]],
        windows: Sequence[dict[str, Any]],
        duplicates: DataFrame,
        losses: DataFrame,
        bad_lines: DataFrame,
        findings: DataFrame,
        unseen: Sequence[dict[str, Any]],
    ) -> Details:
        """The small tables (throughput, windows, unseen) come as rows, the others as Spark tables."""
        series: dict[str, list[dict[str, Any]]] = {}
        for row in sorted(throughput, key=lambda r: (r["topic"], r["second"])):
            series.setdefault(row["topic"], []).append(row)
        longest = sorted(windows, key=lambda w: -w["duration_ms"])
        curves: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in sorted(unseen, key=lambda r: (r["topic"], r["subscription"], r["second"])):
            curves.setdefault((row["topic"], row["subscription"]), []).append(row)
        first = Window.partitionBy("checker").orderBy("ts", F.col("uids")[0])
        firsts = findings.withColumn("nth", F.row_number().over(first)).where(F.col("nth") <= PER_CHECKER)
        return Details(
            throughput=series,
            windows=longest[:5000],
            longest=longest[:ROWS],
            duplicates=[r.asDict() for r in duplicates.orderBy("ts").limit(ROWS).collect()],
            losses=[r.asDict() for r in losses.orderBy("acked_ts", "uid").limit(ROWS).collect()],
            bad_lines=[r.asDict() for r in bad_lines.orderBy("file", "line").limit(ROWS).collect()],
            findings=[r.asDict() for r in firsts.drop("nth").orderBy("ts", "checker").collect()],
            unseen=curves,
        )


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    head = "".join(
        f'<th class="{"n" if i in numeric else ""}">{escape(h)}</th>' for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"n" if i in numeric else ""}">{_cell(v)}</td>' for i, v in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, list):
        return " ".join(f"<code>{escape(str(v))}</code>" for v in value)
    return escape("" if value is None else str(value))


def _card(label: str, value: Any, tone: str = "") -> str:
    return (
        f'<div class="card {tone}"><div class="v">{_cell(value)}</div>'
        f'<div class="k">{escape(label)}</div></div>'
    )


def _at(ts: int | None, origin: int) -> str:
    return "" if ts is None else f"{(ts - origin) / 1e9:,.3f} s"


def render(summary: dict[str, Any], faults: list[Fault], details: Details) -> str:
    head = summary["headline"]
    starts = [p["second"] * 1_000_000_000 for points in details.throughput.values() for p in points]
    origin = min(starts + [f.start_ns for f in faults], default=0)
    cards = "".join(
        [
            _card("events", head["events"]),
            _card("faults", head["faults"]),
            _card("disruption windows", head["windows"]),
            _card("window p50 (ms)", head["window_p50_ms"]),
            _card("window p99 (ms)", head["window_p99_ms"]),
            _card("longest window (ms)", head["window_max_ms"]),
            _card("max unavailability (ms)", head["max_unavailability_ms"]),
            _card("same-region duplicates", head["duplicates_same_region"]),
            _card("cross-region duplicates", head["duplicates_cross_region"]),
            _card(
                "redelivered after their ack",
                head.get("redeliveries_after_ack", 0),
                "bad" if head.get("redeliveries_after_ack") else "",
            ),
            _card("lost messages", head["losses"], "bad" if head["losses"] else "good"),
            _card(
                "reorders (producer / key / partition)",
                " / ".join(f"{head.get(f'reorders_{s}', 0):,}" for s in ("producer", "key", "partition")),
            ),
            _card("bad log lines", head["bad_lines"], "bad" if head["bad_lines"] else ""),
            *[
                _card(
                    name,
                    head.get(headline_key(name), 0),
                    "bad" if head.get(headline_key(name), 0) else "good",
                )
                for name in CHECKERS
            ],
        ]
    )
    parts = [
        f"<h1>Post-mortem of {escape(summary['run'])}</h1>",
        f'<div class="sub">{escape(summary["run_dir"])} · threshold {summary["threshold_ms"]:g} ms · '
        f"{summary['input']['lines']:,} lines in {summary['input']['files']} files · generated "
        f"{escape(summary['generated_at'])} · <code>{escape(summary['schema'])}</code></div>",
        f'<div class="cards">{cards}</div>',
        "<h2>Faults</h2>",
        _faults(summary, origin) if summary["faults"] else _none("No fault activities in journal.json."),
        "<h2>Timeline per topic</h2>",
        '<p class="muted">Shaded: fault activities from the journal. Bars: disruption windows.</p>',
    ]
    for topic, points in sorted(details.throughput.items())[:TOPICS]:
        mine = [w for w in details.windows if w["topic"] == topic]
        parts.append(
            f'<img alt="timeline of {escape(topic)}" src="data:image/png;base64,'
            f'{charts.timeline(topic, points, faults, mine, origin)}">'
        )
    if not details.throughput:
        parts.append(_none("No acknowledged sends or receives."))
    parts += (
        _unseen(details, faults, origin) + _windows(details, origin) + _checkers(summary, details, origin)
    )
    parts += _latency(summary) + _deliveries(summary, details, origin)
    parts += _bad_lines(summary, details)
    body = "\n".join(parts)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Post-mortem {escape(summary['run'])}"
        f"</title><style>{STYLE}</style></head><body>{body}</body></html>\n"
    )


def _none(text: str) -> str:
    return f'<p class="muted">{escape(text)}</p>'


def _faults(summary: dict[str, Any], origin: int) -> str:
    rows = [
        (
            f["name"],
            _at(f["start_ns"], origin),
            f["duration_ms"],
            f["windows"]["count"],
            " / ".join(str(f["windows_by_kind"][kind]) for kind in ("producer", "consumer", "topic")),
            f["windows"]["p50_ms"],
            f["windows"]["p99_ms"],
            f["windows"]["max_ms"],
            f["max_unavailability_ms"],
        )
        for f in summary["faults"]
    ]
    headers = [
        "fault",
        "starts at",
        "activity ms",
        "windows",
        "producer / consumer / topic",
        "p50 ms",
        "p99 ms",
        "max ms",
        "max unavailability ms",
    ]
    return _table(headers, rows, numeric=(2, 3, 5, 6, 7, 8))


def _latency(summary: dict[str, Any]) -> list[str]:
    rows = summary["latency"]
    if not rows:
        return ["<h2>Latency</h2>", _none("No latency measurements.")]
    table = _table(
        ["fault", "phase", "measure", "count", "p50 ms", "p99 ms", "p99.9 ms", "max ms"],
        [
            (
                r["fault"],
                r["phase"],
                r["measure"].replace("_", "-"),
                r["count"],
                r["p50_ms"],
                r["p99_ms"],
                r["p999_ms"],
                r["max_ms"],
            )
            for r in rows
        ],
        numeric=(3, 4, 5, 6, 7),
    )
    return [
        "<h2>Latency</h2>",
        f'<img alt="latency" src="data:image/png;base64,{charts.latency(rows)}">',
        table,
    ]


def _windows(details: Details, origin: int) -> list[str]:
    if not details.longest:
        return ["<h2>Longest disruption windows</h2>", _none("No disruption window above the threshold.")]
    rows = [
        (
            w["kind"],
            w["topic"],
            w["client"] or w["subscription"] or "",
            _at(w["start"], origin),
            w["duration_ms"],
            "yes" if w["open"] else "",
            w["fault"],
        )
        for w in details.longest
    ]
    return [
        "<h2>Longest disruption windows</h2>",
        _table(["kind", "topic", "client", "starts at", "ms", "open", "fault"], rows, numeric=(4,)),
    ]


def _unseen(details: Details, faults: list[Fault], origin: int) -> list[str]:
    head = [
        "<h2>Unseen messages over time</h2>",
        '<p class="muted">Per subscription that ran to the end: messages acknowledged to their producer '
        "and not yet received. A fault that holds messages back is a hump that drains; a loss, a step "
        "that stays.</p>",
    ]
    if not details.unseen:
        return [*head, _none("No subscription ran to the end with acknowledged messages.")]
    return [
        *head,
        f'<img alt="unseen messages over time" src="data:image/png;base64,'
        f'{charts.unseen(details.unseen, faults, origin)}">',
    ]


def _checkers(summary: dict[str, Any], details: Details, origin: int) -> list[str]:
    part = summary["checkers"]
    counts = _table(
        ["checker", "findings", "by fault", "what a finding means"],
        [
            (
                name,
                part[name]["count"],
                ", ".join(f"{fault}: {n:,}" for fault, n in part[name]["by_fault"].items()),
                MEANINGS[name],
            )
            for name in CHECKERS
        ],
        numeric=(1,),
    )
    parts = ["<h2>Checkers</h2>", counts]
    if details.findings:
        parts.append(f'<p class="muted">The first {PER_CHECKER} findings of each checker.</p>')
        parts.append(
            _table(
                [
                    "checker",
                    "subscription",
                    "client",
                    "stream",
                    "message ids",
                    "messages",
                    "at",
                    "fault",
                    "detail",
                ],
                [
                    (
                        f["checker"],
                        f["subscription"],
                        f["client"],
                        f["scope"],
                        list(f["uids"])[:8],
                        f["messages"],
                        _at(f["ts"], origin),
                        f["fault"],
                        f["detail"],
                    )
                    for f in details.findings
                ],
                numeric=(5,),
            )
        )
    else:
        parts.append(_none("No checker found anything."))
    return parts


def _deliveries(summary: dict[str, Any], details: Details, origin: int) -> list[str]:
    dup = summary["duplicates"]
    parts = ["<h2>Duplicates</h2>"]
    if dup["by_subscription"]:
        parts.append(
            _table(
                ["topic", "subscription", "same-region", "cross-region", "example uids"],
                [
                    (
                        d["topic"],
                        d["subscription"],
                        d["same_region"],
                        d["cross_region"],
                        [uid for uids in d["examples"].values() for uid in uids][:8],
                    )
                    for d in dup["by_subscription"]
                ],
                numeric=(2, 3),
            )
        )
        parts.append(
            _table(
                ["uid", "subscription", "kind", "first from", "again from", "at"],
                [
                    (
                        d["uid"],
                        d["subscription"],
                        d["kind"].replace("_", "-"),
                        d["first_cluster"],
                        d["cluster"],
                        _at(d["ts"], origin),
                    )
                    for d in details.duplicates
                ],
            )
        )
    else:
        parts.append(_none("No message was received twice by a subscription."))
    parts.append("<h2>Losses</h2>")
    losses = summary["losses"]
    if losses["count"]:
        parts.append(f'<p class="pos">{losses["count"]:,} acknowledged messages were never received.</p>')
        parts.append(
            _table(
                ["topic", "subscription", "lost", "example uids"],
                [
                    (lo["topic"], lo["subscription"], lo["count"], lo["examples"])
                    for lo in losses["by_subscription"]
                ],
                numeric=(2,),
            )
        )
        parts.append(
            _table(
                ["uid", "subscription", "acknowledged at"],
                [(lo["uid"], lo["subscription"], _at(lo["acked_ts"], origin)) for lo in details.losses],
            )
        )
    else:
        parts.append(_none("Every acknowledged message reached every subscription that ran to the end."))
    return parts


def _bad_lines(summary: dict[str, Any], details: Details) -> list[str]:
    if not summary["bad_lines"]["count"]:
        return []
    return [
        "<h2>Bad log lines</h2>",
        f'<p class="pos">{summary["bad_lines"]["count"]:,} lines were not events; '
        "they are left out of every number.</p>",
        _table(
            ["file:line", "why", "text"],
            [(f"{b['file']}:{b['line']}", b["reason"], b["text"]) for b in details.bad_lines],
        ),
    ]


COMPARED = (
    "events",
    "faults",
    "windows",
    "window_p50_ms",
    "window_p99_ms",
    "window_max_ms",
    "max_unavailability_ms",
    "duplicates_same_region",
    "duplicates_cross_region",
    "redeliveries_after_ack",
    "losses",
    "reorders_producer",
    "reorders_key",
    "reorders_partition",
    "bad_lines",
    *[headline_key(name) for name in CHECKERS],
)


def render_compare(first: dict[str, Any], second: dict[str, Any]) -> str:
    """Two runs side by side: headline numbers, then faults matched by name."""
    a, b = first["headline"], second["headline"]
    rows = [
        (key.replace("_", " "), a.get(key, 0), b.get(key, 0), _delta(a.get(key, 0), b.get(key, 0)))
        for key in COMPARED
    ]
    headline = _table(["measure", first["run"], second["run"], "delta"], rows, numeric=(1, 2, 3))
    by_name = {f["name"]: f for f in second["faults"]}
    fault_rows = []
    for fault in first["faults"]:
        other = by_name.get(fault["name"])
        for label, key in (
            ("windows", "count"),
            ("window p99 ms", "p99_ms"),
            ("longest window ms", "max_ms"),
        ):
            x, y = fault["windows"][key], (other["windows"][key] if other else None)
            fault_rows.append((fault["name"], label, x, y, _delta(x, y)))
        x, y = fault["max_unavailability_ms"], (other["max_unavailability_ms"] if other else None)
        fault_rows.append((fault["name"], "max unavailability ms", x, y, _delta(x, y)))
    faults = _table(["fault", "measure", first["run"], second["run"], "delta"], fault_rows, numeric=(2, 3, 4))
    body = (
        f"<h1>{escape(first['run'])} against {escape(second['run'])}</h1>"
        f'<div class="sub">{escape(first["run_dir"])} · {escape(second["run_dir"])} · '
        "delta is second minus first</div>"
        f"<h2>Headline</h2>{headline}<h2>Faults (matched by name)</h2>"
        f"{faults if fault_rows else _none('No faults in the first run.')}"
    )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Comparison</title>'
        f"<style>{STYLE}</style></head><body>{body}</body></html>\n"
    )


def _delta(x: Any, y: Any) -> str:
    if not isinstance(x, int | float) or not isinstance(y, int | float):
        return ""
    change = y - x
    sign = "+" if change > 0 else ""
    text = f"{sign}{change:,.1f}" if isinstance(change, float) else f"{sign}{change:,}"
    return text
