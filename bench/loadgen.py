"""A publish load generator with the official ``pulsar-client``, run as a process of its own.

    .venv/bin/python bench/loadgen.py pulsar://127.0.0.1:6650 --max-seconds 10 --rate 2000 --rate-seconds 15
    .venv/bin/python bench/loadgen.py pulsar+ssl://127.0.0.1:6651 --trust-certs ca.cert.pem --token-file t

Three phases, each on a topic of its own, every send's result checked (any failure fails the run):
  connect: ``--connects`` times a new client and a producer (CONNECT, lookup, PRODUCER) on a
           topic already loaded; milliseconds each;
  max:     async sends as fast as it goes with at most ``--in-flight`` unacknowledged, for
           ``--max-seconds`` after one second of warm-up; acknowledged sends per second of the
           window, and the cores this process used meanwhile;
  rate:    unbatched sends at ``--rate`` msg/s for ``--rate-seconds`` (first second dropped);
           latency from the time each send was due to its receipt (lateness of the generator
           counts), p50/p99/max.
Progress goes to stderr; the last line on stdout is the JSON of the figures. From another
script: ``run_loadgen(...)``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import Processes, percentile, stop_process

WARMUP_S = 1.0


class SendFailed(RuntimeError):
    pass


def _client(url: str, token: str | None, trust_certs: str | None) -> Any:
    import pulsar

    log = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)  # a Python logger can abort the exit
    options: dict[str, Any] = {"logger": log, "operation_timeout_seconds": 30}
    if token:
        options["authentication"] = pulsar.AuthenticationToken(token)
    if trust_certs:
        options["tls_trust_certs_file_path"] = trust_certs
    return pulsar.Client(url, **options)


def connect_phase(args: argparse.Namespace, token: str | None, topic: str) -> list[float]:
    client = _client(args.url, token, args.trust_certs)
    client.create_producer(topic).close()  # loads the topic once, outside the timing
    client.close()
    times = []
    for _ in range(args.connects):
        start = time.perf_counter()
        client = _client(args.url, token, args.trust_certs)
        producer = client.create_producer(topic)
        times.append((time.perf_counter() - start) * 1000)
        producer.close()
        client.close()
    return times


def max_phase(args: argparse.Namespace, token: str | None, topic: str, payload: bytes) -> dict[str, Any]:
    import pulsar

    client = _client(args.url, token, args.trust_certs)
    producer = client.create_producer(
        topic, batching_enabled=args.batching, batching_max_messages=1000,
        batching_max_publish_delay_ms=1, max_pending_messages=args.in_flight, block_if_queue_full=True,
    )  # fmt: skip
    acked = [0]
    failed: list[str] = []
    ok = pulsar.Result.Ok

    def done(result: Any, _id: Any) -> None:
        if result == ok:
            acked[0] += 1
        else:
            failed.append(str(result))

    sent = 0
    start = time.perf_counter()
    window_start, window_end = start + WARMUP_S, start + WARMUP_S + args.max_seconds
    first: tuple[float, int, float] | None = None
    now = start
    while now < window_end and not failed:
        for _ in range(100):
            producer.send_async(payload, done)
        sent += 100
        now = time.perf_counter()
        if first is None and now >= window_start:
            first = (now, acked[0], time.process_time())
    last = (time.perf_counter(), acked[0], time.process_time())
    producer.flush()
    deadline = time.monotonic() + 60
    while acked[0] + len(failed) < sent and time.monotonic() < deadline:
        time.sleep(0.01)
    client.close()
    if failed or acked[0] < sent:
        missing = sent - acked[0] - len(failed)
        raise SendFailed(f"max: {len(failed)} sends failed ({failed[:3]}), {missing} unanswered")
    assert first is not None
    elapsed = last[0] - first[0]
    return {
        "msgs_per_s": (last[1] - first[1]) / elapsed,
        "window_s": elapsed,
        "sent": sent,
        "generator_cores": (last[2] - first[2]) / elapsed,
    }


def rate_phase(args: argparse.Namespace, token: str | None, topic: str, payload: bytes) -> dict[str, Any]:
    import pulsar

    client = _client(args.url, token, args.trust_certs)
    producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=args.in_flight,
                                      block_if_queue_full=True)  # fmt: skip
    latencies: list[float] = []
    failed: list[str] = []
    done_count = [0]
    ok = pulsar.Result.Ok
    count = int(args.rate * args.rate_seconds)
    start = time.perf_counter()
    measured_from = start + WARMUP_S
    lateness = 0.0
    for i in range(count):
        due = start + i / args.rate
        while (now := time.perf_counter()) < due:
            time.sleep(min(due - now, 0.001))
        lateness = max(lateness, now - due)

        def sent(result: Any, _id: Any, due: float = due) -> None:
            if result != ok:
                failed.append(str(result))
            elif due >= measured_from:
                latencies.append((time.perf_counter() - due) * 1000)
            done_count[0] += 1

        producer.send_async(payload, sent)
    elapsed = time.perf_counter() - start
    producer.flush()
    deadline = time.monotonic() + 60
    while done_count[0] < count and time.monotonic() < deadline:
        time.sleep(0.01)
    client.close()
    if failed or done_count[0] < count:
        missing = count - done_count[0]
        raise SendFailed(f"rate: {len(failed)} sends failed ({failed[:3]}), {missing} unanswered")
    return {
        "rate": args.rate,
        "achieved_msgs_per_s": count / elapsed,
        "samples": len(latencies),
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies, default=float("nan")),
        "generator_max_lateness_ms": lateness * 1000,
    }


def run_phases(args: argparse.Namespace) -> dict[str, Any]:
    token = Path(args.token_file).read_text().strip() if args.token_file else None
    payload = b"x" * args.size
    prefix = f"persistent://public/default/{args.topic_prefix}-{time.time_ns()}"
    result: dict[str, Any] = {}
    if args.connects:
        times = connect_phase(args, token, f"{prefix}-connect")
        result["connect_ms"] = {"median": percentile(times, 0.5), "samples": times}
        _say(args, f"connect + producer: median {percentile(times, 0.5):.1f} ms of {len(times)}")
    if args.max_seconds > 0:
        result["max"] = max_phase(args, token, f"{prefix}-max", payload)
        m = result["max"]
        _say(args, f"max: {m['msgs_per_s']:,.0f} msg/s acked, generator {m['generator_cores']:.2f} cores")
    if args.rate_seconds > 0:
        result["rate"] = rate_phase(args, token, f"{prefix}-rate", payload)
        r = result["rate"]
        _say(args, f"{args.rate:,}/s: p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms")
    return result


def _say(args: argparse.Namespace, text: str) -> None:
    print(f"    {args.label}{text}", file=sys.stderr, flush=True)


def run_loadgen(
    url: str,
    *,
    group: Processes,
    label: str = "",
    token_file: Path | None = None,
    trust_certs: Path | None = None,
    size: int = 1024,
    connects: int = 10,
    max_seconds: float = 10,
    in_flight: int = 5000,
    batching: bool = True,
    rate: int = 2000,
    rate_seconds: float = 15,
    topic_prefix: str = "loadgen",
) -> dict[str, Any]:
    """This script as a process of its own (stopped by PID with ``group``); its figures."""
    command = [
        sys.executable, __file__, url, "--size", str(size), "--connects", str(connects),
        "--max-seconds", str(max_seconds), "--in-flight", str(in_flight), "--rate", str(rate),
        "--rate-seconds", str(rate_seconds), "--topic-prefix", topic_prefix, "--label", label,
        "--batching" if batching else "--no-batching",
    ]  # fmt: skip
    if token_file is not None:
        command += ["--token-file", str(token_file)]
    if trust_certs is not None:
        command += ["--trust-certs", str(trust_certs)]
    process = group.add(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
    budget = 120 + connects * 5 + max_seconds + rate_seconds * 2
    try:
        output, _ = process.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"load generator on {url} still running after {budget:.0f} s") from None
    finally:
        stop_process(process)  # nothing to do once it exited
        group.started.remove(process)
    if process.returncode != 0:
        raise RuntimeError(f"load generator on {url} failed (exit {process.returncode}); see above")
    figures: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("url", help="service URL (pulsar:// or pulsar+ssl://)")
    parser.add_argument("--token-file", help="token authentication: file holding the token")
    parser.add_argument("--trust-certs", help="CA certificate (PEM) for pulsar+ssl://")
    parser.add_argument("--size", type=int, default=1024, help="message size in bytes (1024)")
    parser.add_argument("--connects", type=int, default=10, help="client + producer creations timed (10)")
    parser.add_argument("--max-seconds", type=float, default=10, help="max-rate window, 0 to skip (10)")
    parser.add_argument("--in-flight", type=int, default=5000, help="unacknowledged sends at most (5000)")
    parser.add_argument("--batching", action=argparse.BooleanOptionalAction, default=True,
                        help="batching in the max phase (on)")  # fmt: skip
    parser.add_argument("--rate", type=int, default=2000, help="fixed rate, msg/s (2000)")
    parser.add_argument("--rate-seconds", type=float, default=15, help="fixed-rate length, 0 to skip (15)")
    parser.add_argument("--topic-prefix", default="loadgen")
    parser.add_argument("--label", default="", help="prefix of progress lines")
    args = parser.parse_args()
    try:
        result = run_phases(args)
    except SendFailed as exc:
        print(f"load generator: {exc}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(result), flush=True)
    os._exit(0)  # the client's threads are closed; skip their slow interpreter teardown


if __name__ == "__main__":
    main()
