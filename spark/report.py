"""``report.html``: one page that stands alone (charts embedded as PNG), for one run or two."""

from __future__ import annotations

import base64
import html
import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0}
td,th{padding:.25rem .6rem;border-bottom:1px solid #eee;text-align:right}
th{background:#f5f5f5}td:first-child,th:first-child{text-align:left}.bad{color:#b00020;font-weight:600}
.ok{color:#1b5e20;font-weight:600}.muted{color:#777}img{max-width:100%}
"""


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>" if rows else "<p class=muted>none</p>"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "" if value is None else str(value)


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return "<img src='data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode() + "'>"


def timeline(
    topic: str, series: list[dict[str, Any]], faults: list[dict[str, Any]], windows: list[dict[str, Any]]
) -> str:
    """Published and received per second, faults shaded, disruption windows marked."""
    figure, axis = plt.subplots(figsize=(11, 3.2))
    if series:
        t0 = min(s["second"] for s in series)
        axis.plot([s["second"] - t0 for s in series], [s["published"] for s in series], label="published/s")
        axis.plot([s["second"] - t0 for s in series], [s["received"] for s in series], label="received/s")
        for fault in faults:
            start, end = fault["start_ns"] / 1e9 - t0, fault["end_ns"] / 1e9 - t0
            axis.axvspan(start, max(end, start + 0.3), color="#f4a261", alpha=0.35)
            axis.text(fault["start_ns"] / 1e9 - t0, axis.get_ylim()[1] * 0.92, fault["name"], fontsize=8)
        for window in windows:
            axis.axvspan(window["start"] / 1e9 - t0, window["end"] / 1e9 - t0, color="#e63946", alpha=0.25)
    axis.set_title(topic)
    axis.set_xlabel("seconds into the run")
    axis.legend(loc="lower left")
    return _png(figure)


def render(summary: dict[str, Any], details: dict[str, Any]) -> str:
    head = summary["headline"]
    verdict = (
        "<span class=bad>LOSS</span>"
        if head["losses"]
        else "<span class=ok>no acknowledged message lost</span>"
    )
    parts = [
        "<!doctype html><html><head><meta charset=utf-8>"
        f"<title>Post-mortem {html.escape(summary['run'])}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Post-mortem of run {html.escape(summary['run'])}</h1><p>{verdict}</p>",
        _table(
            [
                "events",
                "faults",
                "windows",
                "window p50 ms",
                "window p99 ms",
                "window max ms",
                "duplicates (same / cross)",
                "losses",
                "out of order",
                "bad lines",
            ],
            [
                [
                    head["events"],
                    head["faults"],
                    head["windows"],
                    head["window_p50_ms"],
                    head["window_p99_ms"],
                    head["window_max_ms"],
                    f"{head['duplicates_same_region']} / {head['duplicates_cross_region']}",
                    head["losses"],
                    head["reorders"],
                    head["bad_lines"],
                ]
            ],
        ),
        "<h2>Faults</h2>",
        _table(
            ["fault", "windows", "p50 ms", "p99 ms", "max ms", "max unavailability ms"],
            [
                [f["name"], f["windows"], f["p50_ms"], f["p99_ms"], f["max_ms"], f["max_unavailability_ms"]]
                for f in summary["faults"]
            ],
        ),
        "<h2>Timelines</h2><p class=muted>faults shaded orange, disruption windows red</p>",
        *details["timelines"],
        "<h2>Latency</h2>",
        _table(
            ["measure", "phase", "count", "p50 ms", "p99 ms", "p99.9 ms", "max ms"],
            [
                [r["measure"], r["phase"], r["count"], r["p50_ms"], r["p99_ms"], r["p999_ms"], r["max_ms"]]
                for r in summary["latency"]
            ],
        ),
        "<h2>Disruption windows</h2>",
        _table(
            ["kind", "client", "topic", "fault", "ms"],
            [
                [w["kind"], w["client"], w["topic"], w["fault"], w["duration_ms"]]
                for w in details["windows"][:50]
            ],
        ),
        "<h2>Duplicates</h2>",
        _table(
            ["subscription", "kind", "count", "example uids"],
            [
                [d["subscription"], d["kind"], d["count"], ", ".join(d["examples"])]
                for d in summary["duplicates"]
            ],
        ),
        "<h2>Losses</h2>",
        _table(
            ["subscription", "count", "example uids"],
            [[d["subscription"], d["count"], ", ".join(d["examples"])] for d in summary["losses"]],
        ),
        "<h2>Bad input lines</h2>",
        _table(
            ["file", "line", "reason"],
            [[b["file"], b["line"], b["reason"]] for b in summary["bad_lines"][:50]],
        ),
        "</body></html>",
    ]
    return "\n".join(parts)


def render_compare(left: dict[str, Any], right: dict[str, Any]) -> str:
    keys = list(left["headline"])
    rows = []
    for key in keys:
        a, b = left["headline"].get(key), right["headline"].get(key)
        delta = b - a if isinstance(a, (int, float)) and isinstance(b, (int, float)) else ""
        rows.append([key, a, b, delta])
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>Compare</title>"
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(left['run'])} vs {html.escape(right['run'])}</h1>"
        + _table(["measure", left["run"], right["run"], "difference"], rows)
        + "</body></html>"
    )
