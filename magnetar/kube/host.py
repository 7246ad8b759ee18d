"""The machine's side of a node: what `up` needs before it starts (root, binaries, free ports), the
bridge and routes it makes, the kernel settings the components change, and mounts under its state."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

from magnetar.kube.control_plane import BIN
from magnetar.kube.layout import (
    BRIDGE,
    NODE_IP,
    NODE_IP_PORTS,
    POD_CIDR,
    PORT_OFFSETS,
    SERVICE_CIDR,
    Layout,
)

KUBE_BINARIES = ("etcd", "kube-apiserver", "kubectl", "kubelet", "kube-controller-manager",
                 "kube-scheduler", "kube-proxy", "coredns", "crictl")  # fmt: skip
#: Debian packages the node runs, and a file each installs
SYSTEM_BINARIES = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "iptables-save": "iptables",
    "ip": "iproute2",
    "gcc": "gcc",
}
CNI_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "portmap", "loopback")

#: kernel settings kubelet, kube-proxy and the bridge plugin may change; `down` puts them back
SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


#: directories outside the state the runtime creates on first use (paths fixed in containerd 1.6,
#: runc and libcni); `down` removes those that were not there before `up` once they are empty
HOST_DIRS = (
    "/var/lib/cni/results",
    "/var/lib/cni",
    "/var/run/netns",
    "/run/containerd/s",
    "/run/containerd",
    "/var/log/containers",
)


class HostError(RuntimeError):
    pass


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, timeout=60)


def require_root(command: str = "up") -> None:
    if os.geteuid() != 0:
        what = "creates" if command == "up" else "removes"
        raise HostError(
            f"magnetar kube {command} needs root: it {what} the bridge {BRIDGE}, routes and iptables "
            "chains, and the processes of containerd and the kubelet (run it as root, e.g. with sudo)"
        )


def missing_binaries(bin_dir: Path = BIN) -> list[str]:
    """Each missing piece with the command that provides it."""
    missing = []
    kube = [b for b in KUBE_BINARIES if not (bin_dir / b).is_file()]
    if kube:
        missing.append(f"{', '.join(kube)} in {bin_dir} (run `make kube-node`, which runs "
                       "`bash operator/testenv/build-k8s.sh etcd kube node`)")  # fmt: skip
    packages = sorted({pkg for b, pkg in SYSTEM_BINARIES.items() if shutil.which(b) is None})
    plugins = [p for p in CNI_PLUGINS if not (CNI_DIR / p).is_file()]
    if plugins:
        packages.append("containernetworking-plugins")
    if packages:
        missing.append(f"Debian packages {' '.join(packages)} (run `make kube-deps`)")
    return missing


def taken_ports(layout: Layout) -> list[str]:
    """Ports of the node some other process holds; NODE_IP's only if the address already exists
    (then another node, or a half-started one, owns it)."""
    taken = []
    for name in PORT_OFFSETS:
        if not _bindable("127.0.0.1", layout.port(name)):
            taken.append(f"127.0.0.1:{layout.port(name)} ({name})")
    # The kubelet's and CoreDNS's ports on NODE_IP clash with anything bound to all addresses.
    for name, port in NODE_IP_PORTS.items():
        kinds = (socket.SOCK_STREAM, socket.SOCK_DGRAM) if name == "dns" else (socket.SOCK_STREAM,)
        if not all(_bindable("0.0.0.0", port, kind) for kind in kinds):
            taken.append(f"0.0.0.0:{port} ({name}, wanted on {NODE_IP})")
    if _address_exists(NODE_IP):
        taken.append(f"{NODE_IP} is already on an interface (another node, or one half-started)")
    return taken


def _bindable(host: str, port: int, kind: int = socket.SOCK_STREAM) -> bool:
    with socket.socket(socket.AF_INET, kind) as s:
        if kind == socket.SOCK_STREAM:  # a port in TIME_WAIT is free for a listener
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _address_exists(address: str) -> bool:
    out = run("ip", "-o", "-4", "addr", "show", check=False).stdout
    return any(f" {address}/" in line for line in out.splitlines())


# -- bridge and routes ----------------------------------------------------------------------------


def bridge_exists(name: str = BRIDGE) -> bool:
    return run("ip", "link", "show", name, check=False).returncode == 0


def make_bridge() -> None:
    """The bridge exists before the API server and kubelet, which listen on its address; the CNI
    bridge plugin finds it with its gateway address already set and attaches pods to it."""
    prefix = POD_CIDR.split("/")[1]
    run("ip", "link", "add", BRIDGE, "type", "bridge")
    run("ip", "addr", "add", f"{NODE_IP}/{prefix}", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")


def add_service_route() -> str:
    # Locally sent packets to a Service IP are routed before kube-proxy's DNAT; with this route they
    # go to the bridge, not the default gateway, whether or not the Service has endpoints.
    run("ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE)
    return SERVICE_CIDR


def remove_bridge(name: str, routes: list[str]) -> list[str]:
    done = []
    for route in routes:
        if run("ip", "route", "del", route, "dev", name, check=False).returncode == 0:
            done.append(f"route {route}")
    # Veths of pods whose sandbox was not torn down: deleting one end deletes its peer in the pod.
    for veth in attached(name):
        run("ip", "link", "del", veth, check=False)
        done.append(f"veth {veth}")
    if bridge_exists(name):
        run("ip", "link", "del", name)
        done.append(f"bridge {name}")
    return done


def attached(bridge: str) -> list[str]:
    out = run("ip", "-o", "link", "show", "master", bridge, check=False).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


# -- kernel settings ------------------------------------------------------------------------------


def read_sysctls() -> dict[str, str]:
    values = {}
    for key in SYSCTLS:
        try:
            values[key] = (Path("/proc/sys") / key).read_text().strip()
        except OSError:
            continue
    return values


def restore_sysctls(before: dict[str, str], after_up: dict[str, str]) -> list[str]:
    """Puts back what changed during `up`, unless something changed it again since (another
    program's setting then, such as a container engine's ip_forward, which is not ours to undo)."""
    restored = []
    for key, value in before.items():
        path = Path("/proc/sys") / key
        try:
            current = path.read_text().strip()
            if current != value and current == after_up.get(key, current):
                path.write_text(value)
                restored.append(f"{key.replace('/', '.')}={value}")
        except OSError:
            continue
    return restored


# -- mounts ---------------------------------------------------------------------------------------


def unmount_under(root: Path) -> list[str]:
    """Unmounts what containerd and the kubelet mounted under ``root`` (sandbox /dev/shm, token
    volumes, snapshots), deepest first; lazily, since a dying shim may still hold one."""
    prefix = str(root.resolve()) + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(prefix):
            points.append(point)
    for point in sorted(set(points), key=len, reverse=True):
        run("umount", "-l", point, check=False)
    return points


# -- directories ----------------------------------------------------------------------------------


def existing_dirs() -> list[str]:
    return [d for d in HOST_DIRS if Path(d).is_dir()]


def remove_new_empty_dirs(before: list[str]) -> list[str]:
    removed = []
    for d in HOST_DIRS:  # deepest first
        path = Path(d)
        if d in before or not path.is_dir() or any(path.iterdir()):
            continue
        try:
            path.rmdir()
        except OSError:
            continue  # a mount point, or filled meanwhile: not ours to force
        removed.append(d)
    return removed
