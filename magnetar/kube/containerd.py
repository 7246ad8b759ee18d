"""A containerd of the node's own (root, state, socket and config under the state directory, so it
never shares anything with a containerd or Docker of the machine), with CRI for the kubelet."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from magnetar.kube.layout import IMAGES_DIR, PAUSE_IMAGE, Layout
from magnetar.kube.pause import build_archive

NAMESPACE = "k8s.io"  # the namespace CRI keeps its images and containers in


def config(layout: Layout) -> str:
    root = layout.containerd
    return f"""version = 2
root = "{root / "root"}"
state = "{root / "state"}"

[grpc]
  address = "{layout.containerd_socket}"

[ttrpc]
  address = "{root / "containerd.sock.ttrpc"}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{root / "opt"}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # Without it runc fails ("can't get final child's PID from pipe: EOF"): lowering a container's
  # oom_score_adj below containerd's own needs CAP_SYS_RESOURCE, which this machine does not grant.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{layout.cni / "net.d"}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        # runc's record of the containers under the state too: `down` finds every container there
        # even when containerd and its shims are gone, and /run/containerd is left alone.
        Root = "{root / "runc"}"
"""


def write_config(layout: Layout) -> Path:
    layout.containerd.mkdir(parents=True, exist_ok=True)
    path = layout.containerd / "config.toml"
    path.write_text(config(layout))
    return path


def ctr(layout: Layout, *args: str, check: bool = True, timeout: float = 120) -> str:
    out = subprocess.run(
        ["ctr", "--address", str(layout.containerd_socket), "-n", NAMESPACE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and out.returncode != 0:
        raise RuntimeError(f"ctr {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def tarballs() -> list[Path]:
    """The image tarballs ``make image`` left in the images cache."""
    return sorted(IMAGES_DIR.glob("*.tar")) if IMAGES_DIR.is_dir() else []


def import_images(layout: Layout, say: Callable[[str], None], images: list[Path]) -> list[Path]:
    """Imports the tarballs ``images`` (``tarballs()``: every one ``make image`` left), all at once
    (each is mostly waiting on the disk: one after the other took their sum), then the pause image
    made here unless one brought it; returns the tarballs that could not be imported. Nothing is
    ever pulled."""
    with ThreadPoolExecutor(max_workers=max(len(images), 1)) as pool:
        results = list(pool.map(lambda tarball: _import(layout, tarball), images))
    skipped = []
    for tarball, problem in zip(images, results, strict=True):
        if problem is None:
            say(f"imported {tarball}")
        else:
            # Say, a tarball `make image` is writing right now; it imports it itself once done.
            say(f"skipped {tarball} ({problem}); `make image` imports it into this node once written")
            skipped.append(tarball)
    if PAUSE_IMAGE not in image_refs(layout):
        archive = build_archive(layout.containerd / "pause.tar")
        ctr(layout, "images", "import", "--no-unpack", str(archive))
        say(f"imported {PAUSE_IMAGE} (built here)")
    return skipped


def _import(layout: Layout, tarball: Path) -> str | None:
    """None once imported, else why not."""
    try:
        import_image(layout, tarball)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None


def import_image(layout: Layout, tarball: Path) -> None:
    """An image tarball into the node's containerd, where the kubelet finds it (nothing is
    pulled); RuntimeError saying why not."""
    ctr(layout, "images", "import", "--all-platforms", str(tarball), timeout=600)


def image_refs(layout: Layout) -> set[str]:
    out = ctr(layout, "images", "ls", "-q", check=False)
    return set(out.split())


def remove_containers(layout: Layout) -> list[str]:
    """Kills and deletes every task and container left in the node's containerd (pods the kubelet
    did not get to stop); their shims exit with their tasks."""
    removed = []
    for task in ctr(layout, "tasks", "ls", "-q", check=False).split():
        ctr(layout, "tasks", "kill", "-s", "SIGKILL", task, check=False)
        ctr(layout, "tasks", "delete", "-f", task, check=False)
        removed.append(task)
    for container in ctr(layout, "containers", "ls", "-q", check=False).split():
        ctr(layout, "containers", "delete", container, check=False)
    return removed


def remove_runc_containers(layout: Layout) -> list[str]:
    """Kills and deletes what runc still knows under the node's runc root (one directory per
    containerd namespace): containers whose containerd and shim died without stopping them."""
    runc_root = layout.containerd / "runc"
    removed = []
    for root in sorted(p for p in runc_root.iterdir() if p.is_dir()) if runc_root.is_dir() else []:
        runc = ["runc", "--root", str(root)]
        listed = subprocess.run([*runc, "list", "-q"], capture_output=True, text=True, timeout=30)
        for container in listed.stdout.split():
            subprocess.run([*runc, "kill", container, "KILL"], capture_output=True, timeout=30)
            out = subprocess.run([*runc, "delete", "--force", container], capture_output=True, text=True,
                                 timeout=30)  # fmt: skip
            if out.returncode != 0:
                raise RuntimeError(f"runc delete {container}: {out.stderr.strip()}")
            removed.append(container)
    return removed


def shim_pids(layout: Layout) -> list[int]:
    """Shims of this containerd: they daemonize, so are not among the PIDs `up` recorded, and name
    its socket on their command line."""
    needle = str(layout.containerd_socket).encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and needle in argv:
            pids.append(int(proc.name))
    return pids
