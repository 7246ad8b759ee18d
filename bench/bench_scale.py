"""Many topics on one broker: what each costs, and how fast a bundle of them moves.

    .venv/bin/python bench/bench_scale.py                          # 1,000 topics, Magnetar
    .venv/bin/python bench/bench_scale.py --topics 1000 10000 --system both
    .venv/bin/python bench/bench_scale.py --topics 5000 --per-client 2500 --system magnetar
    .venv/bin/python bench/bench_scale.py --topics 6000 --profile    # where the broker's reloads go

Each system runs as ZooKeeper (Debian's package), two bookies and one broker on loopback
(E/Qw/Qa 2/2/2, fsync on): Magnetar through ``magnetar local``, Apache Pulsar 4.0.x from Maven
Central through bench/pulsar/apache_pulsar.py. For each size N, client processes
(bench/scale_client.py, the official client's asyncio API, ``--per-client`` topics each) open a
producer and an Exclusive consumer on every topic. The first 1,000 topics are in a namespace of
one bundle (``scale-a``), the rest in a namespace of 16 bundles (``scale-b``). Measured:

  open           launch of the client processes to every producer and consumer open
  RSS / topic    the broker's resident memory added, per topic
  CPU at rest    the broker's CPU (cores) over ``--rest`` seconds with every topic idle
  tasks / topic  the broker's asyncio tasks and timers added, per topic, at rest (Magnetar only:
                 /admin/v2/broker-stats/event-loop; the busiest coroutines go to the JSON; timers
                 only on asyncio's own loop, uvloop does not list them)
  ZK nodes/topic ZooKeeper's node count and data bytes added, per topic (``mntr``)
  ZK writes/s    ZooKeeper's transactions per second at rest (its zxid's advance)
  /metrics       one scrape of the broker's /metrics at rest: seconds, MB, the broker's CPU seconds
  round trip     one message through every topic: sent to its last arrival
  bundle unload  the unload of the 1,000-topic bundle: from the unload's start until every one of
                 its producers has a receipt again for a message sent when the unload returned;
                 ZooKeeper's requests and transactions per topic over that time (``mntr``, the
                 zxid; a multi request is one of each) and the broker's CPU seconds, of them
                 its garbage collections' (Magnetar's magnetar_gc_pause_seconds)
  ns unload      the same for the whole ``scale-b`` namespace (N > 1,000)

``--profile`` records the broker with py-spy through each unload and its reloads (collapsed
stacks in runs/bench/profiles/) and prints the functions most of its samples were in.

Prints a table and writes runs/bench/bench_scale.json. Targets (Magnetar): 100,000 topics served
with RSS <= 30 KB a topic and one message through every topic within 60 s; a 1,000-topic bundle
acknowledged again within 2 s of its unload; a 5,000-topic namespace within 5 s.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "pulsar"))
from common import RUNS, cpu_seconds, write_results
from histograms import buckets, histogram_sum, scrape
from scale_client import ANSWER

from magnetar.admin.client import AdminClient, AdminError
from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.local.supervisor import ClusterState, Supervisor
from magnetar.local.zookeeper import four_letter_word

console = Console(width=max(Console().width, 220))  # the table's twenty columns
RESULTS = RUNS / "bench_scale.json"
CLIENT = Path(__file__).parent / "scale_client.py"
#: topics in the one-bundle namespace whose unload is measured
BUNDLE_TOPICS = 1000
FULL_RANGE = "0x00000000_0xffffffff"
GC_PAUSES = "magnetar_gc_pause_seconds"


@dataclass
class System:
    name: str
    service_url: str
    admin_url: str
    broker_pid: int
    zookeeper: str  # host:port

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        return AdminClient(self.admin_url).call(method, path, body)


@contextmanager
def magnetar(directory: Path, zookeeper_heap: str = "256m") -> Iterator[System]:
    spec = ClusterSpec(
        name="bench-scale",
        regions=[
            RegionSpec(
                name="scale",
                bookies=2,
                brokers=1,
                ledger=LedgerSpec(),
                # as Pulsar's side: bundles move when the benchmark says (a bundle of 1,000 topics
                # with 2,000 sessions would be split)
                broker_settings={"load_balancer_auto_bundle_split_enabled": False},
            )
        ],
        # four nodes a topic: the default 256m ran out of heap near 100,000 topics
        zookeeper_heap=zookeeper_heap,
    )
    supervisor = Supervisor(directory, on_status=lambda m: console.print(f"[dim]{m}[/]"))
    supervisor.up(spec)
    try:
        state = ClusterState.load(directory)
        (broker,) = state.find("broker")
        yield System(
            "magnetar", broker.endpoints["service_url"], broker.endpoints["web_service_url"], broker.pid,
            state.zookeeper,
        )  # fmt: skip
    finally:
        supervisor.down()


@contextmanager
def apache_pulsar(directory: Path) -> Iterator[System]:
    from apache_pulsar import ApachePulsar

    with ApachePulsar(directory) as pulsar:
        endpoints = pulsar.cluster(brokers=1)
        yield System(
            "pulsar", endpoints.service_url, endpoints.admin_url, endpoints.broker_pids[0],
            pulsar.state.zookeeper,
        )  # fmt: skip


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def zookeeper_stats(address: str) -> dict[str, int]:
    """ZooKeeper's node count and data bytes (``mntr``) and its last zxid (``srvr``): every write
    advances the zxid by one."""
    host, port = address.rsplit(":", 1)
    stats = {}
    for line in four_letter_word(host, int(port), "mntr").splitlines():
        key, _, value = line.partition("\t")
        if key in ("zk_znode_count", "zk_approximate_data_size", "zk_packets_received"):
            stats[key] = int(value)
    for line in four_letter_word(host, int(port), "srvr").splitlines():
        if line.startswith("Zxid:"):
            stats["zxid"] = int(line.split()[1], 16) & 0xFFFFFFFF  # the counter within an epoch
    return stats


class Clients:
    """The client processes of one size, each holding ``per_client`` topics, asked in parallel."""

    def __init__(
        self, system: System, spans: list[list[str]], log_dir: Path, client_log_level: str = "Warn"
    ) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.logs = [(log_dir / f"client-{index}.log").open("w") for index in range(len(spans))]
        self.processes = [
            subprocess.Popen(
                [sys.executable, str(CLIENT), system.service_url, *span, "--log-level", client_log_level],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            for span, log in zip(spans, self.logs, strict=True)
        ]
        self.spans = spans

    def _read(self, process: subprocess.Popen[str]) -> dict[str, Any]:
        """The client's next answer (the lines between, the client library's log, are skipped)."""
        assert process.stdout is not None
        log = self.logs[self.processes.index(process)]
        for line in process.stdout:
            if line.startswith(ANSWER):
                answer: dict[str, Any] = json.loads(line.removeprefix(ANSWER))
                return answer
            log.write(line)
        raise RuntimeError(f"client {process.pid} exited ({process.wait()}); see its log")

    def ready(self) -> list[dict[str, Any]]:
        with ThreadPoolExecutor(len(self.processes)) as pool:
            return list(pool.map(self._read, self.processes))

    def ask(self, command: str, only: str | None = None) -> list[dict[str, Any]]:
        """``command`` to every client (holding a topic of namespace ``only``), their answers."""
        chosen = [p for p, span in zip(self.processes, self.spans, strict=True)
                  if only is None or any(s.startswith(f"{only}:") for s in span)]  # fmt: skip
        for process in chosen:
            assert process.stdin is not None
            process.stdin.write(command + "\n")
            process.stdin.flush()
        with ThreadPoolExecutor(len(chosen)) as pool:
            return list(pool.map(self._read, chosen))

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None and process.stdin is not None:
                process.stdin.write("quit\n")
                process.stdin.flush()
        for process in self.processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log in self.logs:
            log.close()


def spans_of(topics: int, per_client: int, a: str, b: str) -> list[list[str]]:
    """Topic ranges (``namespace:first:count``) of each client: the bundle's first, then the rest."""
    ranges = [(a, 0, min(topics, BUNDLE_TOPICS))]
    if topics > BUNDLE_TOPICS:
        ranges.append((b, 0, topics - BUNDLE_TOPICS))
    spans: list[list[str]] = []
    for namespace, first, count in ranges:
        for start in range(first, first + count, per_client):
            spans.append([f"{namespace}:{start}:{min(per_client, first + count - start)}"])
    return spans


def check(answers: list[dict[str, Any]], what: str) -> None:
    failed = sum(a.get("failed", 0) for a in answers)
    if failed or any(a["event"] == "error" for a in answers):
        first = next((a.get("first_failure") or a.get("message") for a in answers if a.get("failed")), "")
        raise RuntimeError(f"{what}: {failed} failed ({first})")


@contextmanager
def profiled(pid: int | None, name: str) -> Iterator[None]:
    """py-spy on ``pid`` while the block runs (nothing when ``pid`` is None); then the functions
    most samples were in, innermost and anywhere on the stack, printed."""
    if pid is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit("--profile needs py-spy (pip install py-spy)")
    out = RUNS / "profiles" / f"bench_scale-{name}-{time.strftime('%Y%m%dT%H%M%S')}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [spy, "record", "--pid", str(pid), "--rate", "200", "--nonblocking", "--format", "raw",
               "--output", str(out)]  # fmt: skip
    spying = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        spying.send_signal(signal.SIGINT)  # py-spy writes what it has on an interrupt
        spying.communicate(timeout=60)
    print_profile(out)


def print_profile(path: Path, top: int = 20) -> None:
    """The functions of a collapsed-stack profile with the most samples, as a share of every
    sample: innermost (self, any code), and anywhere on the stack (total, Magnetar's own functions
    but its entry points, which are on every stack of the loop)."""
    inner: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        samples += int(count)
        inner[_function(frames[-1])] += int(count)
        for function in {_function(f) for f in frames if _is_own(f)}:
            total[function] += int(count)
    table = Table(
        "self %",
        "function",
        "total %",
        "Magnetar's function",
        title=f"py-spy: {path.name} ({samples} samples)",
    )
    rows = itertools.zip_longest(inner.most_common(top), total.most_common(top), fillvalue=("", 0))
    for (f_self, n_self), (f_total, n_total) in rows:
        table.add_row(f"{100 * n_self / samples:.1f}", f_self, f"{100 * n_total / samples:.1f}", f_total)
    console.print(table)


def _is_own(frame: str) -> bool:
    where = frame.partition(" (")[2]
    return "magnetar/" in where and not _ENTRY_POINT.search(where)


#: the modules that start a server: every sample of its loop is under them
_ENTRY_POINT = re.compile(r"/(cli|__main__|process)\.py:\d+\)$")


def _function(frame: str) -> str:
    """``name (path/to/module.py:12)`` -> ``name (module.py)``: a function, not a line."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.split(':')[0].rsplit('/', 1)[-1].rstrip(')')})" if where else name


def unload(
    system: System, clients: Clients, namespace: str, path: str, topics: int, spied: int | None = None
) -> dict[str, Any]:
    """Unload (``path``); when it returns, one message on each of ``namespace``'s ``topics``:
    seconds from the unload's start to the last receipt, how long the unload call took, and
    ZooKeeper's requests and transactions (a multi is one) per topic and the broker's CPU seconds
    from the start until every receipt is in (ZooKeeper's counts are every session's: the
    broker's are nearly all of them then; counts and CPU depend far less on load than times).
    ``spied``: the broker's pid to profile over that time (``profiled``)."""
    # The scrapes for the collections stay outside the window: a scrape of every topic's metrics
    # costs the broker CPU.
    gc_before = gc_totals(system)
    with profiled(spied, f"{namespace.rsplit('/', 1)[-1]}-{topics}"):
        zk_before, cpu_before = zookeeper_stats(system.zookeeper), cpu_seconds(system.broker_pid)
        began = time.time()
        system.admin("PUT", path)
        returned = time.time()
        answers = clients.ask(f"send {namespace}", only=namespace)
        zk_after, cpu_after = zookeeper_stats(system.zookeeper), cpu_seconds(system.broker_pid)
    gc_after = gc_totals(system)
    check(answers, f"sends after the unload of {namespace}")
    requests = zk_after["zk_packets_received"] - zk_before["zk_packets_received"]
    return {
        "acked_again_s": max(a["last_receipt"] for a in answers) - began,
        "call_s": returned - began,
        "zk_requests_per_topic": requests / topics,
        "zk_writes_per_topic": (zk_after["zxid"] - zk_before["zxid"]) / topics,
        "broker_cpu_s": cpu_after - cpu_before,
        **{
            f"broker_gc_{k}": [a - b for a, b in zip(gc_after[k], gc_before[k], strict=True)]
            for k in gc_after
        },
    }


def metrics_scrape(system: System) -> dict[str, float]:
    """One scrape of the broker's /metrics at rest: its seconds, its size, and the broker's CPU
    seconds over it (a Prometheus server asks every 15 to 60 s)."""
    cpu, began = cpu_seconds(system.broker_pid), time.monotonic()
    with urllib.request.urlopen(f"{system.admin_url}/metrics", timeout=300) as response:
        size = len(response.read())
    return {
        "scrape_s": time.monotonic() - began,
        "scrape_mb": size / 2**20,
        "scrape_broker_cpu_s": cpu_seconds(system.broker_pid) - cpu,
    }


def gc_totals(system: System) -> dict[str, list[float]]:
    """The broker's garbage collections so far, per generation: their seconds ("s") and how many
    ("n") (Magnetar's /metrics; nothing for Apache Pulsar)."""
    if system.name != "magnetar":
        return {}
    page = scrape(f"{system.admin_url}/metrics")
    labels = [f'generation="{g}"' for g in range(3)]
    return {
        "s": [histogram_sum(page, GC_PAUSES, label) for label in labels],
        "n": [buckets(page, GC_PAUSES, label + ",")[-1][1] for label in labels],
    }


def event_loop(system: System) -> dict[str, Any] | None:
    """The broker's asyncio tasks and timers (Magnetar's debug view; None for Apache Pulsar)."""
    if system.name != "magnetar":
        return None
    answer: dict[str, Any] = system.admin("GET", "/admin/v2/broker-stats/event-loop")
    return answer


def measure(
    system: System,
    topics: int,
    per_client: int,
    rest_s: float,
    work: Path,
    client_log_level: str = "Warn",
    profile: bool = False,
) -> dict[str, Any]:
    spied = system.broker_pid if profile else None
    tag = f"{topics}-{time.time_ns() % 10**6}"
    a, b = f"public/scale-a-{tag}", f"public/scale-b-{tag}"
    system.admin("PUT", f"/admin/v2/namespaces/{a}", {"bundles": {"numBundles": 1}})
    if topics > BUNDLE_TOPICS:
        system.admin("PUT", f"/admin/v2/namespaces/{b}", {"bundles": {"numBundles": 16}})
    rss_before, zk_before = rss_bytes(system.broker_pid), zookeeper_stats(system.zookeeper)
    loop_before = event_loop(system)
    console.print(f"{system.name}: opening {topics:,} producers and consumers …")
    started = time.monotonic()
    clients = Clients(system, spans_of(topics, per_client, a, b), work / f"clients-{tag}", client_log_level)
    row: dict[str, Any] = {"system": system.name, "topics": topics}
    try:
        answers = clients.ready()
        check(answers, "opening")
        row["open_s"] = time.monotonic() - started
        console.print(f"{system.name}: opened in {row['open_s']:.1f} s; {rest_s:g} s at rest …")
        cpu, zk_rest = cpu_seconds(system.broker_pid), zookeeper_stats(system.zookeeper)
        time.sleep(rest_s)  # the measurement window itself: CPU and writes with nothing happening
        zk_after = zookeeper_stats(system.zookeeper)
        row["rest_cores"] = (cpu_seconds(system.broker_pid) - cpu) / rest_s
        row["zk_writes_per_s"] = (zk_after["zxid"] - zk_rest["zxid"]) / rest_s
        row["rss_mb"] = rss_bytes(system.broker_pid) / 2**20
        row["rss_kb_per_topic"] = (rss_bytes(system.broker_pid) - rss_before) / 1024 / topics
        loop_after = event_loop(system)
        if loop_before is not None and loop_after is not None:
            row["tasks_per_topic"] = (loop_after["tasks"] - loop_before["tasks"]) / topics
            if loop_after["timers"] is not None and loop_before["timers"] is not None:  # None: uvloop
                row["timers_per_topic"] = (loop_after["timers"] - loop_before["timers"]) / topics
            row["tasks_by_coroutine"] = dict(list(loop_after["tasksByCoroutine"].items())[:10])
        row["zk_nodes_per_topic"] = (zk_after["zk_znode_count"] - zk_before["zk_znode_count"]) / topics
        added = zk_after["zk_approximate_data_size"] - zk_before["zk_approximate_data_size"]
        row["zk_bytes_per_topic"] = added / topics
        console.print(
            f"{system.name}: at rest RSS {row['rss_kb_per_topic']:.1f} KB/topic, "
            f"tasks {row.get('tasks_per_topic', float('nan')):.2f}/topic"
        )
        row.update(metrics_scrape(system))
        console.print(f"{system.name}: one message through every topic …")
        answers = clients.ask("roundtrip")
        check(answers, "round trip")
        row["roundtrip_s"] = max(x["seconds"] for x in answers)
        console.print(f"{system.name}: unloading the bundle of {min(topics, BUNDLE_TOPICS):,} topics …")
        bundle = f"/admin/v2/namespaces/{a}/{FULL_RANGE}/unload"
        moved = unload(system, clients, a, bundle, min(topics, BUNDLE_TOPICS), spied)
        row["bundle_unload_s"], row["bundle_unload_call_s"] = moved["acked_again_s"], moved["call_s"]
        row["bundle_unload_zk_requests_per_topic"] = moved["zk_requests_per_topic"]
        row["bundle_unload_zk_writes_per_topic"] = moved["zk_writes_per_topic"]
        row["bundle_unload_broker_cpu_s"] = moved["broker_cpu_s"]
        if "broker_gc_s" in moved:
            row["bundle_unload_broker_gc_s"] = sum(moved["broker_gc_s"])
            row["bundle_unload_broker_gc_by_generation_s"] = moved["broker_gc_s"]
            row["bundle_unload_broker_gcs_by_generation"] = moved["broker_gc_n"]
        if topics > BUNDLE_TOPICS:
            console.print(f"{system.name}: unloading the namespace of {topics - BUNDLE_TOPICS:,} topics …")
            moved = unload(
                system, clients, b, f"/admin/v2/namespaces/{b}/unload", topics - BUNDLE_TOPICS, spied
            )
            row["ns_unload_s"], row["ns_unload_call_s"] = moved["acked_again_s"], moved["call_s"]
            row["ns_unload_broker_cpu_s"] = moved["broker_cpu_s"]
            if "broker_gc_s" in moved:
                row["ns_unload_broker_gc_s"] = sum(moved["broker_gc_s"])
                row["ns_unload_broker_gc_by_generation_s"] = moved["broker_gc_s"]
                row["ns_unload_broker_gcs_by_generation"] = moved["broker_gc_n"]
    except (RuntimeError, AdminError) as exc:  # what was measured before it stays in the table
        console.print(f"[red]{system.name} at {topics:,} topics: {exc}[/]")
        row["error"] = str(exc)
    finally:
        clients.close()
    return row


COLUMNS = (
    ("open_s", "open s", "{:.1f}"),
    ("rss_mb", "broker RSS MB", "{:.0f}"),
    ("rss_kb_per_topic", "RSS KB/topic", "{:.1f}"),
    ("tasks_per_topic", "tasks/topic", "{:.2f}"),
    ("timers_per_topic", "timers/topic", "{:.2f}"),
    ("rest_cores", "CPU at rest", "{:.3f}"),
    ("zk_nodes_per_topic", "ZK nodes/topic", "{:.1f}"),
    ("zk_bytes_per_topic", "ZK bytes/topic", "{:.0f}"),
    ("zk_writes_per_s", "ZK writes/s", "{:.1f}"),
    ("scrape_s", "/metrics s", "{:.2f}"),
    ("scrape_mb", "its MB", "{:.1f}"),
    ("scrape_broker_cpu_s", "its broker CPU s", "{:.2f}"),
    ("roundtrip_s", "round trip s", "{:.2f}"),
    ("bundle_unload_s", "1k-bundle unload s", "{:.2f}"),
    ("bundle_unload_zk_requests_per_topic", "its ZK requests/topic", "{:.1f}"),
    ("bundle_unload_zk_writes_per_topic", "its ZK txns/topic", "{:.1f}"),
    ("bundle_unload_broker_cpu_s", "its broker CPU s", "{:.1f}"),
    ("bundle_unload_broker_gc_s", "of which GC s", "{:.2f}"),
    ("ns_unload_s", "ns unload s", "{:.2f}"),
    ("ns_unload_broker_cpu_s", "its broker CPU s", "{:.1f}"),
    ("ns_unload_broker_gc_s", "of which GC s", "{:.2f}"),
)


def print_table(rows: list[dict[str, Any]]) -> None:
    table = Table(title="many topics on one broker (each with a producer and a consumer)")
    table.add_column("system")
    table.add_column("topics", justify="right")
    for _, title, _ in COLUMNS:
        table.add_column(title, justify="right")
    for r in rows:
        cells = [fmt.format(r[key]) if key in r else "—" for key, _, fmt in COLUMNS]
        table.add_row(r["system"], f"{r['topics']:,}", *cells)
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--topics", type=int, nargs="+", default=[1000], help="sizes to measure (default 1000)"
    )
    parser.add_argument("--system", choices=("magnetar", "pulsar", "both"), default="magnetar")
    parser.add_argument(
        "--per-client", type=int, default=2500, help="topics per client process (default 2500)"
    )
    parser.add_argument("--workdir", help="keep the logs here (default: a temporary directory)")
    parser.add_argument(
        "--client-log-level", choices=("Debug", "Info", "Warn", "Error"), default="Warn",
        help="the client library's log level, in each client's log (default Warn)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the broker through each unload and print where it was"
    )
    parser.add_argument("--rest", type=float, default=10.0, help="seconds of the at-rest window (default 10)")
    args = parser.parse_args()
    systems: dict[str, list[Callable[..., contextlib.AbstractContextManager[System]]]] = {
        "magnetar": [magnetar], "pulsar": [apache_pulsar], "both": [magnetar, apache_pulsar],
    }  # fmt: skip
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        tmp = args.workdir or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="magnetar-scale-", dir=os.environ.get("BENCH_DIR"))
        )
        for start in systems[args.system]:
            for topics in args.topics:
                # a fresh cluster per size: RSS and ZooKeeper's counts start from the same point
                directory = Path(tmp) / f"{start.__name__}-{topics}"
                heap = {"zookeeper_heap": "2g"} if start is magnetar and topics > 20_000 else {}
                with start(directory / "cluster", **heap) as system:
                    options = (args.per_client, args.rest, directory, args.client_log_level, args.profile)
                    rows.append(measure(system, topics, *options))
    print_table(rows)
    write_results(RESULTS, {"rows": rows, "per_client": args.per_client, "rest_s": args.rest})
    console.print(f"results: {RESULTS}")
    if any("error" in r for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
