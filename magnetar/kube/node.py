"""`up`, `down` and `status` of the single-node cluster, step by step. `up` records each thing in the
state file the moment it exists; `down` undoes whatever the state file names, in reverse order, and
works on a half-started node as on a whole one."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from magnetar.kube import (
    cni,
    components,
    containerd,
    dns,
    host,
    image_store,
    iptables,
    kubelet_client_certificate,
    volumes,
)
from magnetar.kube.control_plane import BIN, ControlPlane, ControlPlaneError
from magnetar.kube.layout import BRIDGE, CLUSTER_DOMAIN, NODE_IP, NODE_NAME, POD_CIDR, SERVICE_CIDR, Layout
from magnetar.kube.state import Proc, State, start_time, stop

#: start order; `down` stops in reverse
ORDER = ("containerd", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
         "kubelet", "kube-proxy", "coredns")  # fmt: skip
#: the API server's name in the cluster's own Service, which CoreDNS must resolve
API_SERVICE = f"kubernetes.default.svc.{CLUSTER_DOMAIN}"

Say = Callable[[str], None]


class KubeError(RuntimeError):
    pass


class PreflightError(KubeError):
    """`up` refused before changing anything."""


# -- up -------------------------------------------------------------------------------------------


def up(
    layout: Layout, say: Say, timeout_s: float = 240.0, volume_count: int = volumes.DEFAULT_VOLUMES
) -> State:
    preflight(layout)
    started = time.monotonic()
    state = _fresh_state(layout)
    say(f"state in {layout.state_dir}")
    _bypass_proxies_for_the_node()
    _network(state, say)
    _containerd(layout, state, say)
    ca = _control_plane(layout, state, say)
    _node_components(layout, state, ca, say)
    _wait_ready(layout, state, say, deadline=started + timeout_s)
    _storage(layout, volume_count, say)
    state.chains_made = iptables.new_chains(state.chains_before)
    state.sysctls_after_up = host.read_sysctls()
    state.phase = "up"
    state.save()
    say(f"up in {time.monotonic() - started:.0f}s")
    return state


def preflight(layout: Layout) -> None:
    """Every reason `up` cannot start, named, before it changes anything."""
    host.require_root()
    existing = State.load(layout.state_file)
    if existing is not None:
        what = "is up" if existing.phase == "up" else "was half-started by an earlier `up`"
        down = f"magnetar kube down --state-dir {layout.state_dir}"
        raise PreflightError(f"a node {what} in {layout.state_dir}: run `{down}` first")
    problems = host.missing_binaries(BIN)
    if host.bridge_exists(BRIDGE):
        problems.append(
            f"the bridge {BRIDGE} already exists (another node's, or one whose state is gone: "
            f"`ip link del {BRIDGE}` if it is a leftover)"
        )
    taken = host.taken_ports(layout)
    if taken:
        problems.append("in use: " + ", ".join(taken) + " (another --port-base moves the 127.0.0.1 ones)")
    if problems:
        raise PreflightError("cannot start the node:\n  - " + "\n  - ".join(problems))


def _fresh_state(layout: Layout) -> State:
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    for leftover in (layout.logs, layout.control_plane, layout.config, layout.cni):
        shutil.rmtree(leftover, ignore_errors=True)  # what a clean `down` kept (logs) or never made
    layout.logs.mkdir()
    state = State(path=layout.state_file, port_base=layout.port_base)
    state.chains_before = iptables.chains()
    state.tables_before = iptables.tables()
    state.sysctls_before = host.read_sysctls()
    state.dirs_before = host.existing_dirs()
    state.save()
    return state


def _network(state: State, say: Say) -> None:
    say(f"bridge {BRIDGE} {NODE_IP}, service range {SERVICE_CIDR} routed onto it")
    state.bridge = BRIDGE
    state.save()  # before it exists: a failed `ip link add` half-way leaves nothing unnamed
    host.make_bridge()
    state.routes.append(SERVICE_CIDR)
    state.save()
    host.add_service_route()
    # Pods have no default route; should one be added by hand, nothing they send is forwarded off
    # the bridge either.
    host.run("iptables", "-N", "MAGNETAR-FORWARD")
    host.run("iptables", "-A", "MAGNETAR-FORWARD", "-i", BRIDGE, "!", "-o", BRIDGE, "-j", "DROP")
    host.run("iptables", "-I", "FORWARD", "1", "-j", "MAGNETAR-FORWARD")


#: the node's own addresses, never reached through a proxy the caller's environment may name
NO_PROXY = f"127.0.0.1,localhost,{POD_CIDR},{SERVICE_CIDR}"
#: containerd's image pulls go to a closed local port: a pod naming an image that was not
#: imported fails at once ("connection refused") instead of asking a registry on the internet
PULL_PROXY = "http://127.0.0.1:9"


def _bypass_proxies_for_the_node() -> None:
    # Set in this process, so every process it starts (the control plane's too) inherits it.
    for key in ("NO_PROXY", "no_proxy"):
        os.environ[key] = ",".join(filter(None, [os.environ.get(key, ""), NO_PROXY]))


def _environment(name: str) -> dict[str, str]:
    env = dict(os.environ)
    if name == "containerd":
        for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            env[key] = PULL_PROXY
    return env


def _spawn(layout: Layout, state: State, name: str, argv: list[str]) -> None:
    log = (layout.logs / f"{name}.log").open("ab")
    # A session of its own: the node outlives `up`, and a ^C at the terminal does not reach it.
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=_environment(name), start_new_session=True)  # fmt: skip
    state.record_pid(name, proc.pid)


def _containerd(layout: Layout, state: State, say: Say) -> None:
    say("containerd (its own root, state and socket under the state directory)")
    config = containerd.write_config(layout)
    cni.write_config(layout)
    seeded = image_store.seed(layout, say)
    _spawn(layout, state, "containerd", ["containerd", "--config", str(config)])
    _wait(layout, state, "containerd answers", lambda: _ctr_ok(layout), time.monotonic() + 30)
    containerd.import_images(layout, say, [] if seeded else containerd.tarballs())


def _ctr_ok(layout: Layout) -> bool:
    return layout.containerd_socket.exists() and bool(containerd.ctr(layout, "version", check=False))


def _control_plane(layout: Layout, state: State, say: Say) -> Path:
    say(f"etcd and kube-apiserver at {layout.api_url}")
    _, client_crt, client_key = kubelet_client_certificate.kubelet_client(layout.config / "pki")
    identities = components.Identities()
    plane = ControlPlane(
        layout.control_plane,
        BIN,
        address=NODE_IP,
        ports=(layout.port("kube-apiserver"), layout.port("etcd-client"), layout.port("etcd-peer")),
        service_cidr=SERVICE_CIDR,
        with_nodes=True,
        extra_tokens=identities.token_rows(),
        extra_args=[
            f"--kubelet-client-certificate={client_crt}",
            f"--kubelet-client-key={client_key}",
            "--kubelet-preferred-address-types=InternalIP",
        ],
        detach=True,
        on_spawn=lambda name, proc: state.record_pid(name, proc.pid),
    )
    try:
        plane.start(timeout_s=90)
    except ControlPlaneError as exc:
        raise KubeError(str(exc)) from exc
    ca = layout.control_plane / "certs" / "apiserver.crt"
    shutil.copy(plane.kubeconfig, layout.kubeconfig)
    layout.kubeconfig.chmod(0o600)
    components.write_kubeconfigs(layout, ca, identities)
    out = kubectl(layout, "apply", "-f", "-", stdin=components.RBAC)
    if out.returncode != 0:
        raise KubeError(f"applying the node's RBAC failed: {out.stderr.strip()}")
    return ca


def _node_components(layout: Layout, state: State, ca: Path, say: Say) -> None:
    cp_dir = layout.control_plane
    components.write_kubelet_config(layout, layout.config / "pki" / "kubelet-client-ca.crt")
    components.write_kube_proxy_config(layout)
    components.write_corefile(layout)
    commands = {
        "kube-controller-manager": components.controller_manager_args(layout, cp_dir, ca),
        "kube-scheduler": components.scheduler_args(layout),
        "kubelet": components.kubelet_args(layout),
        "kube-proxy": components.kube_proxy_args(layout),
        "coredns": components.coredns_args(layout),
    }
    for name, args in commands.items():
        say(f"{name}")
        _spawn(layout, state, name, [str(BIN / name), *args])


def _storage(layout: Layout, count: int, say: Say) -> None:
    out = kubectl(layout, "apply", "-f", "-", stdin=volumes.manifests(layout, count))
    if out.returncode != 0:
        raise KubeError(f"applying the node's storage failed: {out.stderr.strip()}")
    say(f"default StorageClass {volumes.STORAGE_CLASS}: {count} local volumes of {volumes.VOLUME_SIZE} "
        f"in {layout.volumes}")  # fmt: skip


def _wait_ready(layout: Layout, state: State, say: Say, deadline: float) -> None:
    checks: list[tuple[str, Callable[[], bool]]] = [
        ("kube-controller-manager healthy", lambda: _healthz(f"https://127.0.0.1:{layout.port('kube-controller-manager')}/healthz")),
        # Pods are admitted only once their namespace's service account exists: a user's first pod
        # right after `up` must not be refused for it.
        ("service account default/default", lambda: kubectl(layout, "get", "sa", "default").returncode == 0),
        ("kube-scheduler healthy", lambda: _healthz(f"https://127.0.0.1:{layout.port('kube-scheduler')}/healthz")),
        ("kubelet healthy", lambda: _healthz(f"http://127.0.0.1:{layout.port('kubelet-healthz')}/healthz")),
        (f"node {NODE_NAME} Ready", lambda: node_ready(layout)),
        ("kube-proxy synced", lambda: _healthz(f"http://127.0.0.1:{layout.port('kube-proxy-healthz')}/healthz")),
        (f"CoreDNS answers {API_SERVICE}", lambda: dns_answers()),
    ]  # fmt: skip
    for what, check in checks:
        _wait(layout, state, what, check, deadline)
        say(what)


def _wait(layout: Layout, state: State, what: str, check: Callable[[], bool], deadline: float) -> None:
    while True:
        dead = [name for name, proc in state.procs.items() if not proc.alive()]
        if dead:
            raise KubeError(f"{', '.join(dead)} exited while waiting for: {what}\n{_tails(layout, dead)}")
        try:
            if check():
                return
        except (OSError, subprocess.SubprocessError, RuntimeError):
            pass
        if time.monotonic() > deadline:
            raise KubeError(f"timed out waiting for: {what} (logs in {layout.logs})")
        time.sleep(1)


def _tails(layout: Layout, names: list[str], lines: int = 15) -> str:
    parts = []
    for name in names:
        for path in (layout.logs / f"{name}.log", layout.control_plane / f"{name}.log"):
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path}:\n" + "\n".join(tail))
    return "\n".join(parts)


def _healthz(url: str) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the components' self-signed serving certificates
    with urllib.request.urlopen(url, context=context, timeout=3) as response:
        return bool(response.status == 200)


def kubectl(layout: Layout, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "kubectl"), f"--kubeconfig={layout.kubeconfig}", *args],
                          input=stdin, capture_output=True, text=True, timeout=60)  # fmt: skip


def node_ready(layout: Layout) -> bool:
    out = kubectl(layout, "get", "node", NODE_NAME, "-o",
                  'jsonpath={.status.conditions[?(@.type=="Ready")].status}')  # fmt: skip
    return out.returncode == 0 and out.stdout.strip() == "True"


def dns_answers() -> bool:
    return bool(dns.resolve_a(API_SERVICE, NODE_IP))


# -- down -----------------------------------------------------------------------------------------


def down(layout: Layout, say: Say) -> list[str]:
    """Removes what the state file names; returns what could not be removed (empty: all gone)."""
    host.require_root("down")
    state = State.load(layout.state_file)
    if state is None:
        say(f"no node recorded in {layout.state_dir}: nothing to do")
        return []
    failures: list[str] = []
    steps: list[tuple[str, Callable[[], object]]] = [
        ("pods", lambda: _stop_pods(layout, state, say)),
        ("processes", lambda: _stop_processes(layout, state, say)),
        ("mounts", lambda: _report(say, "unmounted", host.unmount_under(layout.state_dir))),
        ("pod network", lambda: _report(say, "removed", cni.remove_leftovers())),
        ("bridge", lambda: _report(say, "removed", _remove_bridge(state))),
        ("iptables", lambda: _report(say, "removed", iptables.remove(_chains_to_remove(state)))),
        ("iptables tables", lambda: _report(say, "removed", _remove_tables(state))),
        ("sysctls", lambda: _report(say, "restored", _restore_sysctls(state))),
        ("container log links", lambda: _report(say, "removed", _remove_log_links(layout))),
        ("directories", lambda: _report(say, "removed", host.remove_new_empty_dirs(state.dirs_before))),
    ]  # fmt: skip
    for what, step in steps:
        try:
            step()
        except Exception as exc:  # every step is tried: one that fails must not keep the rest
            failures.append(f"{what}: {exc}")
    if failures:
        return failures
    _remove_state(layout)
    say(f"down: nothing of the node is left (logs kept in {layout.logs})")
    return []


def _restore_sysctls(state: State) -> list[str]:
    return host.restore_sysctls(state.sysctls_before, state.sysctls_after_up)


def _remove_tables(state: State) -> list[str]:
    return iptables.remove_new_empty_tables(state.tables_before)


def _remove_bridge(state: State) -> list[str]:
    return host.remove_bridge(state.bridge, state.routes) if state.bridge else []


def _report(say: Say, verb: str, items: list[str]) -> None:
    for item in items:
        say(f"{verb} {item}")


def _stop_pods(layout: Layout, state: State, say: Say) -> None:
    """Lets the kubelet stop its pods (so the CNI plugins undo their part) while it still runs;
    `remove_containers` catches anything left after."""
    if not all(state.procs[n].alive() for n in ("kube-apiserver", "kubelet") if n in state.procs):
        return
    if "kubelet" not in state.procs:
        return
    # Without the controllers, no StatefulSet or Deployment makes its deleted pods again.
    for name in ("kube-controller-manager", "kube-scheduler"):
        if name in state.procs and stop(name, state.procs[name]):
            say(f"stopped {name} (pid {state.procs[name].pid})")
    kubectl(
        layout, "delete", "pods", "--all", "--all-namespaces", "--force", "--grace-period=0", "--wait=false"
    )
    # The node is going away: no pod needs its grace period (a broker's is 60 s, spent handing its
    # bundles to brokers that are stopping too), so containers are killed, again each second for
    # those the kubelet restarts before it has seen the deletion; it then tears the sandboxes down.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (running := _running_tasks(layout)):
        for task in running:
            containerd.ctr(layout, "tasks", "kill", "--signal", "SIGKILL", task, check=False)
        time.sleep(1)
    say("pods stopped")


def _running_tasks(layout: Layout) -> list[str]:
    listed = containerd.ctr(layout, "tasks", "ls", check=False).splitlines()[1:]
    return [line.split()[0] for line in listed if "RUNNING" in line]


def _stop_processes(layout: Layout, state: State, say: Say) -> None:
    names = [n for n in reversed(ORDER) if n in state.procs]
    for name in names:
        if name == "containerd":
            removed = containerd.remove_containers(layout) if state.procs[name].alive() else []
            if removed:
                say(f"removed {len(removed)} containers")
        if stop(name, state.procs[name]):
            say(f"stopped {name} (pid {state.procs[name].pid})")
    for pid in containerd.shim_pids(layout):
        shim = Proc(pid=pid, start_time=start_time(pid) or 0)
        if stop("containerd-shim", shim, timeout_s=5):
            say(f"stopped containerd-shim (pid {pid})")
    for container in containerd.remove_runc_containers(layout):
        say(f"removed container {container[:12]} left running without its shim")
    alive = [f"{n} (pid {state.procs[n].pid})" for n in names if state.procs[n].alive()]
    if alive:
        raise KubeError("still running: " + ", ".join(alive))


def _chains_to_remove(state: State) -> dict[str, list[str]]:
    # Recorded at the end of `up`, plus any made since (kube-proxy and portmap add chains later, and a
    # half-started `up` never recorded them).
    made = {key: list(names) for key, names in state.chains_made.items()}
    for key, names in iptables.new_chains(state.chains_before).items():
        made[key] = sorted(set(made.get(key, [])) | set(names))
    return made


def _remove_log_links(layout: Layout) -> list[str]:
    # The kubelet links each container's log into /var/log/containers; ours point into the state dir.
    links = Path("/var/log/containers")
    removed = []
    for link in links.glob("*.log") if links.is_dir() else []:
        if link.is_symlink() and str(link.readlink()).startswith(str(layout.state_dir)):
            link.unlink()
            removed.append(str(link))
    return removed


def _remove_state(layout: Layout) -> None:
    for entry in layout.state_dir.iterdir():
        if entry == layout.logs:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


# -- status ---------------------------------------------------------------------------------------


@dataclass
class Status:
    phase: str
    procs: list[tuple[str, int, bool]]
    node_ready: bool
    dns: bool


def status(layout: Layout) -> Status | None:
    state = State.load(layout.state_file)
    if state is None:
        return None
    names = sorted(state.procs, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))
    procs = [(name, state.procs[name].pid, state.procs[name].alive()) for name in names]
    try:
        ready = layout.kubeconfig.exists() and node_ready(layout)
    except (OSError, subprocess.SubprocessError):
        ready = False
    try:
        answering = dns_answers()
    except OSError:
        answering = False
    return Status(phase=state.phase, procs=procs, node_ready=ready, dns=answering)
