"""Magnetar on real pods: how long a cluster takes from `kubectl apply` to its first
acknowledged message, what a rolling restart and a version upgrade through the operator cost
clients, and each pod's memory. Needs root, `make kube-node` and `make image`.

    sudo .venv/bin/python bench/bench_kube.py
    sudo .venv/bin/python bench/bench_kube.py --rate 500 --topics 8 --keep   # leave the node up
    sudo .venv/bin/python bench/bench_kube.py --starts 5 --no-restart      # five starts only
    sudo .venv/bin/python bench/bench_kube.py --no-upgrade                 # no upgrade phase

A node of `magnetar kube up` (its own state directory and ports), the chart, then a MagnetarCluster
of three bookies (E/Qw/Qa 2/2/2) and two brokers, secured as by default:
  1. apply -> first acknowledged message: from `kubectl apply` until a producer on this machine
     (token, the brokers' pod-ip listener) gets its first receipt (target <= 20 s), ``--starts``
     times, each on a node of its own brought up for it (the chart installed and its operator
     running before the apply), each printed with when the cluster's components were Ready;
  2. a rolling restart under ``--rate`` msg/s from lean client processes (bench/windows.py): a
     spec change the operator rolls out, bookies one at a time, then brokers after their bundles
     were transferred away; total time until every pod was replaced and the cluster is Ready
     again, the largest lateness of a producer's receipts meanwhile (target <= 1 s, judged only
     against a floor measured first with nothing happening), and the acknowledged messages lost
     (target 0);
  3. a version upgrade under the same workload: ``spec.image`` from magnetar:0.1.0 to the second
     tag `make image` builds of the same sources (magnetar:0.1.0-next, which reports 0.1.0+next),
     which the operator rolls in stages (bookies, then brokers); the same figures as the restart's,
     and when each stage of ``status.upgrade`` began;
  4. memory (RSS) of each pod's process once the restart (and upgrade) is over.
Prints a table and writes runs/bench/bench_kube.json; exits 1 when a client failed, 2 when the
floor is too high to judge the window.
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
from common import RUNS, percentile, write_results
from windows import BEFORE_S, LeanWorkload, Records, lost, verdict

from magnetar.chaos.pods.target import container_pids
from magnetar.kube.containerd import import_image
from magnetar.kube.control_plane import BIN
from magnetar.kube.layout import IMAGES_DIR, Layout
from magnetar.operator.kube_api import api_client
from magnetar.operator.resources import GROUP, VERSION

console = Console()
ROOT = Path(__file__).resolve().parent.parent
RESULTS = RUNS / "bench_kube.json"
NAME = "bench"
#: where the chart runs the operator
OPERATOR_NAMESPACE = "magnetar"
TARGETS = {"first_ack_s": 20.0, "window_ms": 1000.0, "lost": 0}
#: the components whose pods' readiness a start's breakdown shows, in the order they come up
COMPONENTS = ("zookeeper", "bookie", "broker")
#: the image an upgrade goes to: `make image` saves it apart from the tarballs a node imports
NEXT_LABEL = "next"


@dataclass
class Node:
    state_dir: Path
    _core: Any = None

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        done = subprocess.run([str(BIN / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
                              input=stdin, capture_output=True, text=True, timeout=120)  # fmt: skip
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def pods(self, namespace: str = "default", selector: str = "") -> list[dict[str, Any]]:
        """The pods, as `kubectl get pods -o json` lists them, from an API client in this process:
        what the bench polls while it measures, so no kubectl process starts on the machine's
        two cores in the middle of a floor or a window."""
        core = self._api()
        found = core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
        return list(json.loads(found.data)["items"])

    def cluster(self) -> dict[str, Any]:
        """The MagnetarCluster, from the same in-process API client."""
        from kubernetes import client

        custom = client.CustomObjectsApi(self._api().api_client)
        found = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "magnetarclusters", NAME)
        return dict(found)

    def _api(self) -> Any:
        if self._core is None:
            from kubernetes import client

            self._core = client.CoreV1Api(api_client(str(self.kubeconfig)))
        return self._core

    def import_image(self, tarball: Path) -> None:
        import_image(Layout(self.state_dir), tarball)


def magnetar(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "magnetar", *args], capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"magnetar {' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def manifest() -> str:
    doc = yaml.safe_load((ROOT / "examples/k8s/local/cluster.yaml").read_text())
    doc["metadata"]["name"] = NAME
    doc["spec"]["bookies"]["replicas"] = 3
    doc["spec"]["brokers"].update({"replicas": 2, "readOnlyReplicas": 0})
    return yaml.safe_dump(doc)


def next_image() -> tuple[str, str, Path]:
    """The cluster's image, the one an upgrade goes to, and the latter's tarball."""
    image = str(yaml.safe_load((ROOT / "examples/k8s/local/cluster.yaml").read_text())["spec"]["image"])
    name, _, tag = image.rpartition(":")
    return image, f"{image}-{NEXT_LABEL}", IMAGES_DIR / "upgrade" / f"{name}-{tag}-{NEXT_LABEL}.tar"


def first_ack(node: Node, workdir: Path) -> tuple[float, Path, str]:
    """Applies the cluster and sends until a send is acknowledged; the seconds, the token's file
    and the broker Service's address."""
    import pulsar

    started = time.monotonic()
    node.kubectl("apply", "-f", "-", stdin=manifest())
    token_file = workdir / "token"
    while time.monotonic() - started < 600:
        try:
            secret = node.json("secret", f"{NAME}-superuser-token")
            ip = node.json("service", f"{NAME}-broker")["spec"]["clusterIP"]
        except RuntimeError:
            time.sleep(0.5)
            continue
        token = base64.b64decode(secret["data"]["token"]).decode().strip()
        token_file.write_text(token)
        client = pulsar.Client(f"pulsar://{ip}:6650", listener_name="pod-ip", operation_timeout_seconds=5,
                               authentication=pulsar.AuthenticationToken(token))  # fmt: skip
        try:
            client.create_producer("persistent://public/default/first-ack").send(b"first")
            return time.monotonic() - started, token_file, ip
        except Exception:  # not up yet: the next try
            time.sleep(0.5)
        finally:
            client.close()
    raise RuntimeError(
        f"no acknowledged message within 600 s of kubectl apply\n{node.kubectl('get', 'pods')}"
    )


def breakdown(node: Node, applied_at: float) -> dict[str, float]:
    """Seconds from the apply until each component's last pod was Ready (its Ready condition's
    transition), and until the operator's Converged Event; and the containers' restarts (a
    process that gave up waiting and went into the kubelet's back-off): where a start's time went."""
    found: dict[str, float] = {}
    restarts = 0
    for pod in node.json("pods", "-l", f"app.kubernetes.io/instance={NAME}")["items"]:
        restarts += sum(c.get("restartCount", 0) for c in pod["status"].get("containerStatuses", []))
        component = pod["metadata"]["labels"].get("app.kubernetes.io/component", "")
        ready = [
            c for c in pod["status"].get("conditions", []) if c["type"] == "Ready" and c["status"] == "True"
        ]
        if component in COMPONENTS and ready:
            at = _stamp(ready[0]["lastTransitionTime"]) - applied_at
            found[component] = max(found.get(component, 0.0), at)
    converged = node.json("events", "--field-selector", f"involvedObject.name={NAME},reason=Converged")
    stamps = [_stamp(e["lastTimestamp"] or e["metadata"]["creationTimestamp"]) for e in converged["items"]]
    if stamps:
        found["Converged"] = min(stamps) - applied_at
    return {k: found[k] for k in (*COMPONENTS, "Converged") if k in found} | {"restarts": restarts}


def one_start(node: Node, workdir: Path, port_base: int) -> tuple[float, dict[str, float], Path, str]:
    """A node, the chart, then apply -> first acknowledged message; the node stays up."""
    magnetar("kube", "up", "--state-dir", str(node.state_dir), "--port-base", str(port_base))
    helm = [str(BIN / "helm"), f"--kubeconfig={node.kubeconfig}", "install", "magnetar",
            str(ROOT / "charts/magnetar"), "--namespace", OPERATOR_NAMESPACE, "--create-namespace",
            "--wait", "--timeout", "180s"]  # fmt: skip
    subprocess.run(helm, check=True, capture_output=True, timeout=240)
    applied_at = time.time()
    seconds, token_file, ip = first_ack(node, workdir)
    # Ready transitions are stamped to the second: the breakdown is coarser than the figure.
    return seconds, breakdown(node, applied_at), token_file, ip


def rolling_restart(
    node: Node, ip: str, token_file: Path, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    change = {"spec": {"bookies": {"config": {"journal_max_group_wait_msec": 3}},
                       "brokers": {"config": {"managed_ledger_max_entries_per_ledger": 50001}}}}  # fmt: skip
    return roll(node, ip, token_file, args, workdir / "clients", change, "rolling restart")


def upgrade(node: Node, ip: str, token_file: Path, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The cluster's image to the next tag (imported into the node first), under the same workload."""
    image, target, tarball = next_image()
    node.import_image(tarball)
    change = {"spec": {"image": target}}
    found = roll(node, ip, token_file, args, workdir / "clients-upgrade", change, "upgrade")
    return {"from": image, "to": target} | found


def roll(
    node: Node,
    ip: str,
    token_file: Path,
    args: argparse.Namespace,
    clients: Path,
    change: dict[str, Any],
    what: str,
) -> dict[str, Any]:
    """``change`` patched into the cluster under the workload, until every pod was replaced and
    the cluster is Ready: the floor before it, the windows during it, and when each stage of
    ``status.upgrade`` was first seen (seconds after the patch)."""
    topics = [f"persistent://public/default/roll-{i}" for i in range(args.topics)]
    workload = LeanWorkload(f"pulsar://{ip}:6650", topics, args.rate / args.topics, clients,
                            token_file=token_file, listener_name="pod-ip")  # fmt: skip
    # The logs are followed before the workload starts: the kubectl processes that follow them
    # start in a burst that is no part of the floor.
    logs = PodLogs(node, clients / "pod-logs")
    logs.start()
    if not logs.following.wait(60):
        raise RuntimeError("the pods' logs were not followed within 60 s")
    workload.start()
    floor_from = time.monotonic_ns()
    time.sleep(args.floor_seconds)
    patched_ns = time.monotonic_ns()
    patched_at = time.time()
    node.kubectl("patch", "mgc", NAME, "--type", "merge", "-p", json.dumps(change))
    console.print(f"[dim]{what} started[/]")
    stages: dict[str, float] = {}
    try:
        done_ns = wait_rolled(node, patched_at, timeout_s=900, stages=stages)
        time.sleep(2)
    finally:
        logs.stop()
    produced, consumed = workload.stop()
    # A message due just before the patch is late by what the patch set off: it belongs to the
    # roll's window (which begins BEFORE_S before the patch, as a move's does), not to the floor.
    moved_from = patched_ns - int(BEFORE_S * 1e9)
    floor = produced.windows_ms(floor_from + 1_000_000_000, moved_from)
    during = produced.windows_ms(moved_from, done_ns)
    announced = restarts(node, patched_at)
    per_topic = {
        topic.rsplit("/", 1)[-1]: blame(
            announced, latest_of(produced, topic, moved_from, done_ns), patched_ns
        )
        for topic in topics
    }
    return {
        "rate": args.rate, "topics": args.topics,
        "total_s": (done_ns - patched_ns) / 1e9,
        "floor_max_ms": max(floor, default=0.0), "floor_p99_ms": percentile(floor, 0.99),
        "window_max_ms": max(during, default=0.0), "window_p99_ms": percentile(during, 0.99),
        "acked": produced.count, "lost": lost(produced, consumed),
        "latest": blame(announced, produced.latest(moved_from, done_ns), patched_ns),
        "per_topic": per_topic, "restarts": announced, "patched_at": patched_at, "pod_logs": str(logs.folder),
        "stages_s": stages,
    }  # fmt: skip


class PodLogs:
    """Follows the logs of every pod of the cluster into ``folder`` while a roll runs (a pod the
    roll deletes takes its logs with it), each line stamped by the kubelet: what a window followed
    is read there afterwards, beside the restarts' times."""

    def __init__(self, node: Node, folder: Path) -> None:
        self.node = node
        self.folder = folder
        self._followed: dict[str, subprocess.Popen[bytes]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pod-logs", daemon=True)
        #: set once every running pod's log is followed
        self.following = threading.Event()

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for old in self.folder.glob("*.log"):  # an earlier run's
            old.unlink()
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                pods = self.node.pods(selector=f"app.kubernetes.io/instance={NAME}")
                pods += self.node.pods(OPERATOR_NAMESPACE)  # the operator's
            except Exception as e:  # the API server busy or restarting: the next poll
                console.print(f"[dim]pod logs: listing pods failed: {e}[/]")
                pods = []
            for pod in pods:
                uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
                running = any(
                    "running" in c.get("state", {}) for c in pod["status"].get("containerStatuses", [])
                )
                if running and uid not in self._followed:
                    with (self.folder / f"{name}-{uid[:8]}.log").open("wb") as out:
                        self._followed[uid] = subprocess.Popen(
                            [str(BIN / "kubectl"), f"--kubeconfig={self.node.kubeconfig}", "logs", "-f",
                             "--timestamps", "-n", pod["metadata"]["namespace"], name],
                            stdout=out, stderr=subprocess.STDOUT,
                        )  # fmt: skip
            if pods:
                self.following.set()
            self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for process in self._followed.values():
            if process.poll() is None:
                process.terminate()
            process.wait()


def latest_of(produced: Records, topic: str, start_ns: int, end_ns: int) -> tuple[str, int, float] | None:
    """``topic``'s latest message due within [start, end]: the topic, due time (ns), lateness (ms)."""
    pairs = zip(produced.due_ns.get(topic, []), produced.done_ns.get(topic, []), strict=True)
    found = [(done - due, due) for due, done in pairs if start_ns <= due <= end_ns]
    if not found:
        return None
    late, due = max(found)
    return topic, due, late / 1e6


#: the operator's Events for a pod it deletes: a roll's restart (bundles moved away first for a
#: broker), and the replacement of a pod of an older template that is not ready (nothing moved)
RESTART_REASONS = ("RestartingPod", "ReplacingPod")


def restarts(node: Node, patched_at: float) -> list[tuple[float, str]]:
    """The pod restarts and replacements the operator announced: seconds after the patch and what
    happened to which pod, in order."""
    found = []
    for reason in RESTART_REASONS:
        events = node.json("events", "--field-selector", f"involvedObject.name={NAME},reason={reason}")
        found += [
            (
                _stamp(e["lastTimestamp"] or e["metadata"]["creationTimestamp"]) - patched_at,
                e["message"].split()[1].rstrip(":")
                + (" replaced, not ready (nothing moved away)" if reason == "ReplacingPod" else " restarted"),
            )
            for e in events["items"]
        ]
    return sorted(found)


def blame(announced: list[tuple[float, str]], latest: tuple[str, int, float] | None, patched_ns: int) -> str:
    """When the latest message was due (seconds after the patch) and the pod restart announced last
    before then: where to look for the window."""
    if latest is None:
        return "no message"
    topic, due_ns, late_ms = latest
    due_s = (due_ns - patched_ns) / 1e9
    before = [r for r in announced if r[0] <= due_s]
    after = f"{before[-1][1]} at +{before[-1][0]:.0f} s" if before else "before any restart"
    name = topic.rsplit("/", 1)[-1]
    return f"{late_ms:,.0f} ms late on {name}, due +{due_s:.1f} s; last before it: {after}"


def _stamp(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def wait_rolled(node: Node, since: float, timeout_s: float, stages: dict[str, float] | None = None) -> int:
    """Until every bookie and broker pod was made after ``since`` and the cluster is Ready;
    ``stages`` gets each stage of ``status.upgrade`` towards a new version, with when it was first
    seen (seconds after ``since``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        doc = node.cluster()
        upgrading = doc.get("status", {}).get("upgrade") or {}
        moving = upgrading.get("currentVersion") != upgrading.get("targetVersion") or stages
        if stages is not None and moving and upgrading.get("stage") not in stages:
            stages[upgrading["stage"]] = time.time() - since
        pods = node.pods(selector=f"app.kubernetes.io/instance={NAME}")
        rolled = [
            p for p in pods if p["metadata"]["labels"].get("app.kubernetes.io/component") != "zookeeper"
        ]
        fresh = all(_created(p) > since and _ready(p) for p in rolled) and len(rolled) == 5
        conditions = doc.get("status", {}).get("conditions", [])
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        if fresh and ready:
            return time.monotonic_ns()
        time.sleep(1)
    raise RuntimeError(
        f"the rolling restart did not finish in {timeout_s:.0f} s\n{node.kubectl('get', 'pods')}"
    )


def _created(pod: dict[str, Any]) -> float:
    return _stamp(pod["metadata"]["creationTimestamp"])


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def pod_memory(node: Node) -> dict[str, float]:
    """RSS (MB) of each pod's process, by the host PID the node's containerd gives."""
    pids = container_pids(str(node.state_dir / "containerd" / "containerd.sock"))
    memory = {}
    for pod in node.json("pods", "-A")["items"]:
        for status in pod["status"].get("containerStatuses", []):
            pid = pids.get(status.get("containerID", "").rpartition("//")[2])
            if pid:
                memory[pod["metadata"]["name"]] = _rss_mb(pid)
    return dict(sorted(memory.items()))


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def add_rows(table: Table, what: str, found: dict[str, Any], judged: str) -> None:
    """A roll's rows: its total time, the floor before it, its window and the messages lost."""
    table.add_row(f"{what}, total", f"{found['total_s']:.0f} s", "", "")
    table.add_row(
        f"floor before the {what}: largest producer lateness, nothing happening",
        f"{found['floor_max_ms']:.0f} ms", "", "",
    )  # fmt: skip
    table.add_row(f"{what}: largest producer lateness", f"{found['window_max_ms']:.0f} ms", "<= 1 s", judged)
    table.add_row(f"{what}: the latest message", found["latest"], "", "")
    for topic, latest in found.get("per_topic", {}).items():
        table.add_row(f"{what}: {topic}'s latest message", latest, "", "")
    table.add_row(f"{what}: acknowledged messages lost", f"{found['lost']} of {found['acked']:,}", "0",
                  "yes" if found["lost"] == 0 else "no")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rate", type=float, default=500, help="msg/s over all topics during the restart (500)"
    )
    parser.add_argument("--topics", type=int, default=8, help="topics, four a client process (8)")
    parser.add_argument("--floor-seconds", type=float, default=10, help="nothing happening first (10)")
    parser.add_argument("--port-base", type=int, default=20440, help="the node's ports (20440)")
    parser.add_argument("--keep", action="store_true", help="leave the node up at the end")
    parser.add_argument("--starts", type=int, default=1, help="starts to measure, each on a fresh node (1)")
    parser.add_argument("--no-restart", action="store_true", help="the starts only: no rolling restart")
    parser.add_argument("--no-upgrade", action="store_true", help="no version upgrade after the restart")
    args = parser.parse_args()
    workdir = RUNS / "bench-kube"
    node = Node(workdir / "state")
    starts: list[dict[str, Any]] = []
    roll: dict[str, Any] = {}
    upgraded: dict[str, Any] = {}
    memory: dict[str, float] = {}
    for i in range(args.starts):
        last = i == args.starts - 1
        what = "a node, the chart, then kubectl apply -> first acknowledged message"
        console.print(f"[bold]1.[/] start {i + 1}/{args.starts}: {what} …")
        try:
            seconds, parts, token_file, ip = one_start(node, workdir, args.port_base)
            starts.append({"first_ack_s": seconds, "ready_s": parts})
            shown = ", ".join(f"{k} {v:.0f} s" for k, v in parts.items() if k != "restarts")
            console.print(
                f"    {seconds:.1f} s (Ready after the apply: {shown}; restarts {parts['restarts']:.0f})"
            )
            if last and not args.no_restart:
                console.print(f"[bold]2.[/] rolling restart under {args.rate:,.0f} msg/s …")
                roll = rolling_restart(node, ip, token_file, args, workdir)
                if not args.no_upgrade:
                    _, target, _ = next_image()
                    console.print(f"[bold]3.[/] upgrade to {target} under {args.rate:,.0f} msg/s …")
                    upgraded = upgrade(node, ip, token_file, args, workdir)
                memory = pod_memory(node)
        finally:
            if not (last and args.keep):
                magnetar("kube", "down", "--state-dir", str(node.state_dir))
    table = Table(title="Magnetar on a magnetar kube node (2 cores): 3 bookies, 2 brokers")
    for column in ("measure", "figure", "target", "met"):
        table.add_column(column)
    for i, start in enumerate(starts, 1):
        seconds = start["first_ack_s"]
        table.add_row(f"start {i}: kubectl apply -> first acked message", f"{seconds:.1f} s", "<= 20 s",
                      "yes" if seconds <= TARGETS["first_ack_s"] else "no")  # fmt: skip
    judged = ""
    if roll:
        judged = verdict(roll["window_max_ms"], TARGETS["window_ms"], roll["floor_max_ms"])
        add_rows(table, "rolling restart", roll, judged)
    if upgraded:
        stages = ", ".join(f"{stage} +{s:.0f} s" for stage, s in upgraded["stages_s"].items())
        table.add_row(f"upgrade {upgraded['from']} -> {upgraded['to']}: stages seen", stages, "", "")
        upgrade_judged = verdict(upgraded["window_max_ms"], TARGETS["window_ms"], upgraded["floor_max_ms"])
        add_rows(table, "upgrade", upgraded, upgrade_judged)
    for pod, mb in memory.items():
        table.add_row(f"RSS {pod}", f"{mb:.0f} MB", "", "")
    console.print(table)
    slowest = max(s["first_ack_s"] for s in starts)
    write_results(RESULTS, {"first_ack_s": slowest, "starts": starts, "rolling_restart": roll,
                            "upgrade": upgraded, "memory_mb": memory, "window_verdict": judged})  # fmt: skip
    console.print(f"results: {RESULTS}")
    if judged.startswith("cannot tell"):
        sys.exit(2)


if __name__ == "__main__":
    main()
