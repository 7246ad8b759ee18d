"""The Pulsar project's Go perf tool (``pulsar-perf-go``) as the load generator.

Built once from the Go module proxy into ~/.cache/magnetar/perf-go (about a minute) and run as a
process of its own, so no Python client shares a core with what it measures. It fails the run on
any failed send (``log.Fatal``) and prints, every 10 s, the publish rate and the latency
percentiles of that interval (measured from just before its rate limiter releases a message to the
send's callback). The first interval is warm-up and is dropped.

    .venv/bin/python bench/perf_go.py produce pulsar://127.0.0.1:6650 --rate 2000 --seconds 30
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

VERSION = "v0.19.0"
MODULE = "github.com/apache/pulsar-client-go/perf"
BIN = Path.home() / ".cache" / "magnetar" / "perf-go" / VERSION / "bin" / "perf"
#: interval the tool reports on
INTERVAL_S = 10
_PUBLISH = re.compile(
    r"Publish rate:\s*([\d.]+) msg/s.*?50%\s*([\d.]+) -95%\s*([\d.]+) - 99%\s*([\d.]+) - 99.9%\s*([\d.]+)"
    r" - max\s*([\d.]+)",
    re.S,
)
console = Console()


class PerfError(RuntimeError):
    pass


def ensure_built() -> Path:
    """The pulsar-perf-go binary, built with ``go install`` the first time."""
    if BIN.exists():
        return BIN
    console.print(f"building pulsar-perf-go {VERSION} (go install {MODULE}, about a minute) …")
    env = {**os.environ, "GOBIN": str(BIN.parent), "GOFLAGS": "-mod=mod"}
    built = subprocess.run(
        ["go", "install", f"{MODULE}@{VERSION}"], env=env, capture_output=True, text=True, timeout=1200
    )
    if built.returncode != 0 or not BIN.exists():
        raise PerfError(f"go install {MODULE}@{VERSION} failed:\n{built.stderr[-3000:]}")
    return BIN


@dataclass
class PublishFigures:
    msgs_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    intervals: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def _run(args: list[str], seconds: float) -> str:
    """Run the tool for ``seconds`` (at least two intervals), then stop it; its log.

    SIGTERM, not Ctrl-C: on Ctrl-C the tool closes its producer with sends in flight, whose
    callbacks then fail fatally; a failure logged before the stop is a real one."""
    command = [str(ensure_built()), "--metrics", "-1", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + max(seconds, 2 * INTERVAL_S) + 1
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        output, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    if "level=fatal" in output or (process.returncode not in (0, -signal.SIGTERM) and "Stats" not in output):
        raise PerfError(f"pulsar-perf-go {' '.join(args)} failed:\n{output[-3000:]}")
    return output


def produce(
    service_url: str,
    topic: str,
    *,
    rate: int,
    seconds: float,
    batching: bool,
    size: int = 1024,
    client_args: Sequence[str] = (),
) -> PublishFigures:
    """Publish at ``rate`` msg/s (0: as fast as it goes); every interval after the first, the
    mean rate and the worst interval's percentiles. ``client_args``: the tool's client flags
    (``--token-file``, ``--trust-cert-file``, ``--cert-file``/``--key-file``)."""
    batch = [] if batching else ["--batching-num-messages", "1"]
    output = _run(
        ["-u", service_url, *client_args, "produce", topic, "--rate", str(rate), "--size", str(size), *batch],
        seconds,
    )
    intervals = [tuple(float(v) for v in m.groups()) for m in _PUBLISH.finditer(output)][1:]
    if not intervals:
        raise PerfError(f"pulsar-perf-go printed no full interval after warm-up:\n{output[-3000:]}")
    worst = max(intervals, key=lambda i: i[3])
    return PublishFigures(
        msgs_per_s=sum(i[0] for i in intervals) / len(intervals),
        p50_ms=worst[1],
        p95_ms=worst[2],
        p99_ms=worst[3],
        p999_ms=worst[4],
        max_ms=max(i[5] for i in intervals),
        intervals=len(intervals),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["produce", "build"])
    parser.add_argument("service_url", nargs="?", default="pulsar://127.0.0.1:6650")
    parser.add_argument("--topic", default=f"persistent://public/default/perf-go-{time.time_ns()}")
    parser.add_argument("--rate", type=int, default=0, help="msg/s, 0 for unthrottled (0)")
    parser.add_argument("--seconds", type=float, default=30, help="run length (30; intervals are 10 s)")
    parser.add_argument("--batching", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    if args.mode == "build":
        console.print(str(ensure_built()))
        return
    figures = produce(
        args.service_url, args.topic, rate=args.rate, seconds=args.seconds, batching=args.batching
    )
    console.print(figures.as_dict())


if __name__ == "__main__":
    main()
