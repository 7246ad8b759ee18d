"""Broker throughput and latency with the official client.

    .venv/bin/python bench/produce_consume.py                   # everything (a few minutes)
    .venv/bin/python bench/produce_consume.py --seconds 5 --backlog 200000

One broker process and two bookie processes (E/Qw/Qa 2/2/2, fsync on) on a real ZooKeeper, all
on loopback, and the official `pulsar-client`:
  (a) max publish throughput, 1 KiB messages, batching on;
  (b) publish latency p50/p99 at a fixed 2,000 msg/s without batching;
  (c) end-to-end latency p99 in the same run;
  (d) catch-up read rate of a backlog (default 1,000,000 messages);
  (e) broker RSS idle and under (a);
  (f) `magnetar standalone` start-to-ready.
Targets: (a) >= 100,000 msg/s; (b) p99 <= 10 ms; (d) >= 200,000 msg/s; (e) <= 150 MB idle; (f) <= 1 s.
Prints a table and writes bench/results/produce_consume.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pulsar
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
from common import percentile, start_standalone
from local_storage import LocalStorageCluster

console = Console()
RESULTS = Path(__file__).parent / "results" / "produce_consume.json"
PAYLOAD = b"x" * 1024
#: the client's own (C++) logger: a Python logger can abort the process at exit
#: (apache/pulsar-client-python#256)
_LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_broker(metadata_url: str, log: Path) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable, "-m", "magnetar", "broker", "--metadata-store-url", metadata_url,
        "--port", "0", "--web-port", "0", "--log-level", "WARNING",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    assert process.stdout is not None
    for line in process.stdout:
        match = re.search(r"service_url=(\S+)", line)
        if match:
            return process, match.group(1)
    raise RuntimeError(f"broker did not start; see {log}")


def max_throughput(url: str, seconds: float, broker_pid: int, topic: str | None = None) -> dict[str, Any]:
    client = pulsar.Client(url, logger=_LOG)
    topic = topic or f"persistent://public/default/throughput-{time.time_ns()}"
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=5, max_pending_messages=20000,
                                      block_if_queue_full=True)  # fmt: skip
    sent = [0]
    rss = []
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for _ in range(1000):
            producer.send_async(PAYLOAD, None)
        sent[0] += 1000
        if sent[0] % 50_000 == 0:
            rss.append(rss_mb(broker_pid))
    producer.flush()
    elapsed = time.perf_counter() - start
    client.close()
    return {"msgs_per_s": sent[0] / elapsed, "rss_under_load_mb": max(rss) if rss else rss_mb(broker_pid)}


def fixed_rate_latency(url: str, rate: int, seconds: float) -> dict[str, Any]:
    client = pulsar.Client(url, logger=_LOG)
    topic = f"persistent://public/default/latency-{time.time_ns()}"
    consumer = client.subscribe(topic, "bench")
    producer = client.create_producer(topic, batching_enabled=False)
    publish: list[float] = []
    end_to_end: list[float] = []
    done = threading.Event()

    def consume() -> None:
        while not done.is_set():
            try:
                message = consumer.receive(200)
            except pulsar.Timeout:
                continue
            sent_ns = int(message.properties()["t"])
            end_to_end.append((time.time_ns() - sent_ns) / 1e6)
            consumer.acknowledge(message)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    start = time.perf_counter()
    count = int(rate * seconds)
    for i in range(count):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            time.sleep(min(due - now, 0.001))
        stamp = time.perf_counter()

        def sent(_result: pulsar.Result, _id: pulsar.MessageId, stamp: float = stamp) -> None:
            publish.append((time.perf_counter() - stamp) * 1000)

        producer.send_async(PAYLOAD, sent, properties={"t": str(time.time_ns())})
    producer.flush()
    deadline = time.monotonic() + 30
    while len(end_to_end) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    done.set()
    thread.join()
    client.close()
    return {
        "rate": rate,
        "publish_p50_ms": percentile(publish, 0.5),
        "publish_p99_ms": percentile(publish, 0.99),
        "e2e_p50_ms": percentile(end_to_end, 0.5),
        "e2e_p99_ms": percentile(end_to_end, 0.99),
    }


def catch_up(url: str, backlog: int) -> dict[str, Any]:
    client = pulsar.Client(url, logger=_LOG)
    topic = f"persistent://public/default/backlog-{time.time_ns()}"
    consumer = client.subscribe(topic, "late", receiver_queue_size=5000)
    consumer.close()
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=5, block_if_queue_full=True)  # fmt: skip
    for _ in range(backlog):
        producer.send_async(PAYLOAD, None)
    producer.flush()
    consumer = client.subscribe(topic, "late", receiver_queue_size=5000)
    start = time.perf_counter()
    for received in range(1, backlog + 1):
        message = consumer.receive(30_000)
        if received % 1000 == 0:
            consumer.acknowledge_cumulative(message)
    elapsed = time.perf_counter() - start
    client.close()
    return {"backlog": backlog, "msgs_per_s": backlog / elapsed}


def standalone_start(workdir: Path) -> float:
    standalone = start_standalone(workdir / "standalone")
    standalone.stop()
    return standalone.start_s


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    result: dict[str, Any] = {}
    with_cluster = LocalStorageCluster(workdir / "cluster", bookies=2)
    with_cluster.start()
    broker, url = start_broker(with_cluster.url, workdir / "broker.log")
    try:
        time.sleep(1)
        result["rss_idle_mb"] = rss_mb(broker.pid)
        console.print("[bold](a)[/] max publish throughput, 1 KiB, batching …")
        result["throughput"] = max_throughput(url, args.seconds, broker.pid)
        console.print(f"[bold](b, c)[/] latency at {args.rate:,} msg/s without batching …")
        result["latency"] = fixed_rate_latency(url, args.rate, args.seconds)
        console.print(f"[bold](d)[/] catch-up read of {args.backlog:,} messages …")
        result["catch_up"] = catch_up(url, args.backlog)
    finally:
        broker.terminate()
        broker.wait(30)
        with_cluster.stop()
    console.print("[bold](f)[/] standalone start-to-ready …")
    result["standalone_start_s"] = standalone_start(workdir)
    return result


def print_table(result: dict[str, Any]) -> None:
    table = Table(title="Magnetar broker, official client, 1 KiB messages, E/Qw/Qa 2/2/2, fsync on")
    for column in ("measure", "Magnetar", "target"):
        table.add_column(column, justify="right" if column != "measure" else "left")
    latency = result["latency"]
    throughput = f"{result['throughput']['msgs_per_s']:,.0f} msg/s"
    catch_up = f"{result['catch_up']['msgs_per_s']:,.0f} msg/s"
    rows = [
        ("(a) publish throughput, batching", throughput, ">= 100,000 msg/s"),
        (f"(b) publish p50 at {latency['rate']:,}/s", f"{latency['publish_p50_ms']:.2f} ms", ""),
        (f"(b) publish p99 at {latency['rate']:,}/s", f"{latency['publish_p99_ms']:.2f} ms", "<= 10 ms"),
        ("(c) end-to-end p99", f"{latency['e2e_p99_ms']:.2f} ms", ""),
        (f"(d) catch-up read of {result['catch_up']['backlog']:,}", catch_up, ">= 200,000 msg/s"),
        ("(e) broker RSS idle", f"{result['rss_idle_mb']:.0f} MB", "<= 150 MB"),
        ("(e) broker RSS under (a)", f"{result['throughput']['rss_under_load_mb']:.0f} MB", ""),
        ("(f) standalone start-to-ready", f"{result['standalone_start_s']:.2f} s", "<= 1 s"),
    ]  # fmt: skip
    for row in rows:
        table.add_row(*row)
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10, help="length of (a) and (b) (default 10)")
    parser.add_argument("--rate", type=int, default=2000, help="fixed rate of (b) (default 2000/s)")
    parser.add_argument("--backlog", type=int, default=1_000_000, help="messages in (d) (default 1,000,000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-", dir=os.environ.get("BENCH_DIR")) as tmp:
        result = run(args, Path(tmp))
    print_table(result)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    console.print(f"results: {RESULTS}")


if __name__ == "__main__":
    main()
