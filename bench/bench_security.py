"""What token authentication and TLS cost a publisher, beside the plain figure, in one run.

    .venv/bin/python bench/bench_security.py --quick          # smoke run, about a minute
    .venv/bin/python bench/bench_security.py                  # 2 rounds, about 4 minutes
    .venv/bin/python bench/bench_security.py --rounds 3 --max-seconds 20 --size 4096 --no-batching

Three ``magnetar standalone`` variants (one bookie, fsync on), one at a time on the same machine,
taken in a rotated order each round so that drift of the machine falls on all of them:
  plain: pulsar://, no authentication;
  token: pulsar://, authentication_providers=token (HS256 key and token made with
         ``magnetar tokens``), the client with AuthenticationToken;
  tls:   pulsar+ssl:// with a certificate from magnetar.common.certificates' CA, the client
         trusting that CA.
For each, the load generator (bench/loadgen.py: the official ``pulsar-client`` in a process of
its own, every send's result checked) measures
  (a) max publish throughput: async sends as fast as it goes, at most --in-flight unacknowledged,
      batched unless --no-batching, acknowledged sends per second over --max-seconds;
  (b) publish p50/p99 at a fixed --rate (2,000 msg/s) without batching, from when each send was due;
  (c) connect: a new client and producer (CONNECT, lookup, PRODUCER), the median of --connects.
Floor first: the same generator against bench/noop_broker.py (answers every send at once, stores
nothing), plain and TLS, shows what the generator itself manages; a variant's figure near the
floor measures the generator, not the broker (the floor rows say so).
  (d) unless --no-perf-go: max batched publish with pulsar-perf-go (the Pulsar project's Go client,
      bench/perf_go.py) and the cores the standalone used meanwhile.
Targets: tls max >= 85 % of plain (pulsar-perf-go's max when measured); token max and p99 within
noise of plain (noise: the larger of --noise and the spread of plain's rounds; p99 gets at least
25 %), its cost only at connect.
Figures are the median over rounds. Prints a table and writes runs/bench/bench_security.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
import perf_go
from common import (
    RUNS,
    Processes,
    cpu_seconds,
    processes,
    start_noop,
    start_standalone,
    stop_process,
    write_results,
)
from loadgen import run_loadgen

from magnetar.common.certificates import CertificateAuthority

console = Console(width=180)
RESULTS = RUNS / "bench_security.json"
VARIANTS = ("plain", "token", "tls")
TLS_TARGET = 0.85
P99_NOISE_MIN = 0.25


@dataclass
class Secrets:
    secret_key: Path
    token: Path
    ca: Path
    cert: Path
    key: Path


def make_secrets(directory: Path) -> Secrets:
    """An HS256 key and an ``admin`` token (``magnetar tokens``), a CA and the broker's certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    secret_key, token = directory / "secret.key", directory / "admin.token"
    magnetar = [sys.executable, "-m", "magnetar", "tokens"]
    subprocess.run([*magnetar, "create-secret-key", "--output", str(secret_key)], check=True)
    made = subprocess.run(
        [*magnetar, "create", "--secret-key", f"file://{secret_key}", "--subject", "admin"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    token.write_text(made.stdout.strip())
    ca = CertificateAuthority(directory / "ca")
    issued = ca.issue("broker", "broker", hosts=("127.0.0.1", "localhost"))
    return Secrets(secret_key, token, ca.certificate_path, issued.certificate, issued.key)


def settings(variant: str, secrets: Secrets) -> dict[str, object]:
    if variant == "token":
        return {
            "authentication_enabled": "true",
            "authentication_providers": "token",
            "token_secret_key": f"file://{secrets.secret_key}",
            "broker_client_authentication_plugin": "token",
            "broker_client_authentication_parameters": f"file://{secrets.token}",
        }
    if variant == "tls":
        return {
            "broker_service_port_tls": 0,
            "web_service_port_tls": 0,
            "tls_certificate_file_path": secrets.cert,
            "tls_key_file_path": secrets.key,
        }
    return {}


def loadgen_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "size": args.size,
        "connects": args.connects,
        "max_seconds": args.max_seconds,
        "in_flight": args.in_flight,
        "batching": args.batching,
        "rate": args.rate,
        "rate_seconds": args.rate_seconds,
    }


def measure_floor(args: argparse.Namespace, secrets: Secrets, group: Processes) -> dict[str, Any]:
    process, url, url_tls = start_noop(group, secrets.cert, secrets.key)
    try:
        console.print("[bold]floor[/]: the generator against the no-op broker, plain …")
        plain = run_loadgen(url, group=group, label="floor: ", topic_prefix="floor", **loadgen_options(args))
        console.print("[bold]floor-tls[/]: the generator against the no-op broker, TLS …")
        tls = run_loadgen(url_tls, group=group, label="floor-tls: ", trust_certs=secrets.ca,
                          topic_prefix="floor-tls", **loadgen_options(args))  # fmt: skip
    finally:
        stop_process(process)
    return {"floor": plain, "floor-tls": tls}


def measure_variant(
    variant: str, args: argparse.Namespace, secrets: Secrets, workdir: Path, group: Processes, label: str
) -> dict[str, Any]:
    standalone = start_standalone(
        workdir / f"standalone-{variant}-{time.time_ns()}", settings(variant, secrets), group=group
    )
    try:
        url = standalone.service_url_tls if variant == "tls" else standalone.service_url
        result = run_loadgen(
            url, group=group, label=f"{label}: ", topic_prefix=f"security-{variant}",
            token_file=secrets.token if variant == "token" else None,
            trust_certs=secrets.ca if variant == "tls" else None, **loadgen_options(args),
        )  # fmt: skip
        result["standalone_start_s"] = standalone.start_s
        if args.perf_go:
            result["perf_go"] = perf_go_max(variant, url, standalone.process.pid, secrets, args)
        return result
    finally:
        standalone.stop()
        group.started.remove(standalone.process)


def perf_go_max(
    variant: str, url: str, broker_pid: int, secrets: Secrets, args: argparse.Namespace
) -> dict[str, Any]:
    """Batched publish as fast as pulsar-perf-go goes (a Go client in its own process, far
    faster than the Python one), and the cores the standalone used meanwhile: near one core, the
    broker's event loop is what bounds the figure, not the generator."""
    client_args = {
        "token": ["--token-file", str(secrets.token)],
        "tls": ["--trust-cert-file", str(secrets.ca)],
    }
    cpu_before, wall_before = cpu_seconds(broker_pid), time.monotonic()
    figures = perf_go.produce(
        url, f"persistent://public/default/perf-{variant}-{time.time_ns()}", rate=0,
        seconds=args.perf_go_seconds, batching=True, size=args.size, client_args=client_args.get(variant, []),
    )  # fmt: skip
    cores = (cpu_seconds(broker_pid) - cpu_before) / (time.monotonic() - wall_before)
    console.print(
        f"    {variant}: pulsar-perf-go max: {figures.msgs_per_s:,.0f} msg/s, standalone {cores:.2f} cores"
    )
    return {"msgs_per_s": figures.msgs_per_s, "broker_cores": cores}


def spread(values: list[float]) -> float:
    """(max - min) / median of a variant's rounds: 0 with one round."""
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0


def summarize(runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per floor and variant: medians over rounds, vs plain, target, met."""

    def median(name: str, read: Any) -> float:
        return float(statistics.median(read(r) for r in runs[name]))

    rows: dict[str, dict[str, Any]] = {}
    for name in runs:
        rows[name] = {
            "variant": name,
            "rounds": len(runs[name]),
            "max_msgs_per_s": median(name, lambda r: r["max"]["msgs_per_s"]),
            "p50_ms": median(name, lambda r: r["rate"]["p50_ms"]),
            "p99_ms": median(name, lambda r: r["rate"]["p99_ms"]),
            "connect_ms": median(name, lambda r: r["connect_ms"]["median"]),
            "generator_cores": median(name, lambda r: r["max"]["generator_cores"]),
            "perf_go_msgs_per_s": median(name, lambda r: r["perf_go"]["msgs_per_s"])
            if _perf(runs[name])
            else None,
            "broker_cores": median(name, lambda r: r["perf_go"]["broker_cores"])
            if _perf(runs[name])
            else None,
        }
    plain = rows["plain"]
    plain_runs = runs["plain"]
    noise_max = max(args.noise / 100, spread([r["max"]["msgs_per_s"] for r in plain_runs]))
    noise_p99 = max(P99_NOISE_MIN, args.noise / 100, spread([r["rate"]["p99_ms"] for r in plain_runs]))
    for row in rows.values():
        row["vs_plain_pct"] = (row["max_msgs_per_s"] / plain["max_msgs_per_s"] - 1) * 100
    token, tls = rows["token"], rows["tls"]
    token["target"] = f"max ≥ −{noise_max:.0%}, p99 ≤ +{noise_p99:.0%} of plain (noise)"
    max_kept = token["max_msgs_per_s"] >= plain["max_msgs_per_s"] * (1 - noise_max)
    token["met"] = max_kept and token["p99_ms"] <= plain["p99_ms"] * (1 + noise_p99)
    token["connect_cost_ms"] = token["connect_ms"] - plain["connect_ms"]
    tls["target"] = f"max ≥ {TLS_TARGET:.0%} of plain"
    tls["met"] = tls["max_msgs_per_s"] >= TLS_TARGET * plain["max_msgs_per_s"]
    if plain["perf_go_msgs_per_s"]:  # the Go generator's figures, when measured, decide the max targets
        for row in rows.values():
            if row["perf_go_msgs_per_s"]:
                row["perf_go_vs_plain_pct"] = (
                    row["perf_go_msgs_per_s"] / plain["perf_go_msgs_per_s"] - 1
                ) * 100
        tls["met"] = tls["perf_go_msgs_per_s"] >= TLS_TARGET * plain["perf_go_msgs_per_s"]
        perf_kept = token["perf_go_msgs_per_s"] >= plain["perf_go_msgs_per_s"] * (1 - noise_max)
        token["met"] = perf_kept and token["p99_ms"] <= plain["p99_ms"] * (1 + noise_p99)
    tls["connect_cost_ms"] = tls["connect_ms"] - plain["connect_ms"]
    plain["target"], plain["met"] = "reference", None
    # the generator is not what is measured when its floor is well above the variants it bounds
    for floor, bounded in (("floor", ("plain", "token")), ("floor-tls", ("tls",))):
        best = max(rows[v]["max_msgs_per_s"] for v in bounded)
        rows[floor]["target"] = f"≥ {args.floor_margin:g}× {' and '.join(bounded)} max"
        rows[floor]["met"] = rows[floor]["max_msgs_per_s"] >= args.floor_margin * best
    return [rows[name] for name in ("floor", "floor-tls", *VARIANTS)]


def _perf(runs: list[dict[str, Any]]) -> bool:
    return bool(runs) and all("perf_go" in r for r in runs)


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    batching = "batched" if args.batching else "unbatched"
    table = Table(
        title=f"Publish cost of token auth and TLS: magnetar standalone, {args.size:,} B messages, "
        f"max {batching}, latency at {args.rate:,} msg/s unbatched, median of {args.rounds} round(s)"
    )
    columns = ("variant", "max msg/s", "vs plain (%)", "perf-go max msg/s", "vs plain (%)", "broker cores",
               "p50 ms", f"p99 ms at {args.rate:,}/s", "connect ms", "target", "met?")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column in ("variant", "target") else "right")
    for row in rows:
        met = {True: "[green]yes[/]", False: "[red]no[/]", None: "—"}[row["met"]]
        perf = row.get("perf_go_msgs_per_s")
        table.add_row(
            row["variant"], f"{row['max_msgs_per_s']:,.0f}", f"{row['vs_plain_pct']:+.1f}",
            f"{perf:,.0f}" if perf else "—",
            f"{row['perf_go_vs_plain_pct']:+.1f}" if "perf_go_vs_plain_pct" in row else "—",
            f"{row['broker_cores']:.2f}" if row.get("broker_cores") else "—",
            f"{row['p50_ms']:.2f}", f"{row['p99_ms']:.2f}", f"{row['connect_ms']:.1f}", row["target"], met,
        )  # fmt: skip
    console.print(table)
    console.print(
        "floor rows: the same generator against bench/noop_broker.py (nothing stored); "
        "a 'no' there means the Python generator, not the broker, bounds that variant's max; "
        "the pulsar-perf-go column (a Go client) decides the max targets when measured, and "
        "'broker cores' near 1 says the standalone's event loop bounded it. "
        f"Machine: {os.cpu_count()} cores, shared with whatever else runs."
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 1 round, 3 s max, 4 s at the rate, 5 connects"
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds over the three variants (2)")
    parser.add_argument("--max-seconds", type=float, default=10, help="max-throughput window (10)")
    parser.add_argument("--rate", type=int, default=2000, help="fixed publish rate, msg/s (2000)")
    parser.add_argument("--rate-seconds", type=float, default=15, help="length at the fixed rate (15)")
    parser.add_argument("--connects", type=int, default=20, help="client + producer creations timed (20)")
    parser.add_argument("--size", type=int, default=1024, help="message size in bytes (1024)")
    parser.add_argument("--in-flight", type=int, default=5000, help="unacknowledged sends at most (5000)")
    parser.add_argument("--batching", action=argparse.BooleanOptionalAction, default=True,
                        help="batching in the max-throughput phase (on)")  # fmt: skip
    parser.add_argument("--noise", type=float, default=5, help="least noise allowed token, in %% (5)")
    parser.add_argument("--floor-margin", type=float, default=1.25,
                        help="floor max must be this many times a variant's max (1.25)")  # fmt: skip
    parser.add_argument("--perf-go", action=argparse.BooleanOptionalAction, default=True,
                        help="also max batched with pulsar-perf-go (on; off in --quick)")  # fmt: skip
    parser.add_argument("--perf-go-seconds", type=float, default=30,
                        help="pulsar-perf-go window; its first 10 s interval is warm-up (30)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON file ({RESULTS})")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.max_seconds, args.rate_seconds, args.connects = 1, 3, 4, 5
        args.perf_go = False
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in ("floor", "floor-tls", *VARIANTS)}
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="magnetar-security-", dir=os.environ.get("BENCH_DIR")) as tmp,
        processes() as group,
    ):
        workdir = Path(tmp)
        secrets = make_secrets(workdir / "secrets")
        for name, figures in measure_floor(args, secrets, group).items():
            runs[name].append(figures)
        for round_index in range(args.rounds):
            order = VARIANTS[round_index % 3 :] + VARIANTS[: round_index % 3]
            for step, variant in enumerate(order, 1):
                label = f"round {round_index + 1}/{args.rounds}, {variant} ({step}/3)"
                console.print(f"[bold]{label}[/]: standalone, connect, max, {args.rate:,}/s …")
                runs[variant].append(measure_variant(variant, args, secrets, workdir, group, variant))
    rows = summarize(runs, args)
    print_table(rows, args)
    path = write_results(args.out, {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "elapsed_s": time.monotonic() - started, "rows": rows, "runs": runs,
    })  # fmt: skip
    console.print(f"results: {path}  ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: every process this run started is stopped")
        sys.exit(130)
