"""Charts for the report, as base64 PNG (the report stands alone: no files beside it)."""

from __future__ import annotations

import base64
import io
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt

from magnetar.spark.journal import Fault

NS = 1e9
LANES = {"producer": 2, "consumer": 1, "topic": 0}
COLOURS = {"producer": "#d9480f", "consumer": "#1971c2", "topic": "#862e9c"}
FAULT_COLOUR = "#fab005"


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def timeline(
    topic: str,
    points: list[dict[str, Any]],
    faults: list[Fault],
    windows: list[dict[str, Any]],
    origin_ns: int,
) -> str:
    """Messages per second published and received, fault activities shaded, windows as bars below."""
    figure, (rate, lanes) = plt.subplots(
        2, 1, figsize=(11, 4.2), sharex=True, gridspec_kw={"height_ratios": [3, 1.2]}
    )
    seconds = [p["second"] * NS - origin_ns for p in points]
    xs = [s / NS for s in seconds]
    rate.plot(xs, [p["published"] for p in points], label="published (send_ok)/s", color="#2b8a3e", lw=1.4)
    rate.plot(xs, [p["received"] for p in points], label="received/s", color="#1971c2", lw=1.2, ls="--")
    rate.set_ylabel("messages / s")
    rate.set_title(topic, loc="left", fontsize=10)
    rate.grid(alpha=0.3)
    for axis in (rate, lanes):
        for fault in faults:
            start, end = (fault.start_ns - origin_ns) / NS, (fault.end_ns - origin_ns) / NS
            # instantaneous actions still get a visible band
            axis.axvspan(start, max(end, start + 0.05), color=FAULT_COLOUR, alpha=0.35, lw=0)
    top = rate.get_ylim()[1]
    for fault in faults:
        rate.text(
            (fault.start_ns - origin_ns) / NS,
            top * 0.97,
            f" {fault.name}",
            fontsize=8,
            va="top",
            color="#5c3c00",
        )
    for kind, lane in LANES.items():
        bars = [
            ((w["start"] - origin_ns) / NS, max((w["end"] - w["start"]) / NS, 0.02))
            for w in windows
            if w["kind"] == kind
        ]
        lanes.broken_barh(bars, (lane - 0.35, 0.7), color=COLOURS[kind])
    lanes.set_yticks(list(LANES.values()), [f"{k} windows" for k in LANES])
    lanes.set_ylim(-0.6, 2.6)
    lanes.set_xlabel("seconds since the first event")
    lanes.grid(axis="x", alpha=0.3)
    rate.legend(loc="lower left", fontsize=8)
    figure.tight_layout()
    return _png(figure)


def latency(rows: list[dict[str, Any]]) -> str:
    """p50/p99/p999 per fault and phase, publish and end-to-end side by side (log scale)."""
    measures = ("publish", "end_to_end")
    figure, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for axis, measure in zip(axes, measures, strict=True):
        mine = [r for r in rows if r["measure"] == measure]
        labels = [f"{r['fault']}\n{r['phase']}" for r in mine]
        xs = range(len(mine))
        for offset, (column, colour) in enumerate(
            (("p50_ms", "#74c0fc"), ("p99_ms", "#1c7ed6"), ("p999_ms", "#0b3d91"))
        ):
            axis.bar(
                [x + (offset - 1) * 0.27 for x in xs],
                [max(r[column], 1e-3) for r in mine],
                0.27,
                label=column.removesuffix("_ms"),
                color=colour,
            )
        axis.set_xticks(list(xs), labels, fontsize=7)
        axis.set_yscale("log")
        axis.set_title(measure.replace("_", "-") + " latency (ms)", loc="left", fontsize=10)
        axis.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    return _png(figure)


#: at most this many subscriptions get a line in the unseen-messages chart
CURVES = 8


def unseen(
    curves: dict[tuple[str, str], list[dict[str, Any]]],
    faults: list[Fault],
    origin_ns: int,
) -> str:
    """Acknowledged-but-not-yet-received messages per subscription over time (a step per second),
    fault activities shaded."""
    figure, axis = plt.subplots(figsize=(11, 3.2))
    for (topic, subscription), points in sorted(curves.items())[:CURVES]:
        xs = [(p["second"] * NS - origin_ns) / NS for p in points]
        axis.step(xs, [p["unseen"] for p in points], where="post", lw=1.3, label=f"{subscription} ({topic})")
    for fault in faults:
        start, end = (fault.start_ns - origin_ns) / NS, (fault.end_ns - origin_ns) / NS
        axis.axvspan(start, max(end, start + 0.05), color=FAULT_COLOUR, alpha=0.35, lw=0)
        axis.text(start, 0.97, f" {fault.name}", transform=axis.get_xaxis_transform(), fontsize=8, va="top",
                  color="#5c3c00")  # fmt: skip
    axis.set_ylabel("unseen messages")
    axis.set_xlabel("seconds since the first event")
    axis.grid(alpha=0.3)
    axis.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    return _png(figure)
