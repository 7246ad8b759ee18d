"""Ports for the servers a test or a local cluster starts, chosen before each server binds its own.

A port the kernel hands out for ``bind((host, 0))`` comes from the ephemeral range
(``net.ipv4.ip_local_port_range``), the range every outgoing connection on the machine also takes
its source port from. Between choosing such a port and the server binding it (seconds for a JVM,
most of a cluster's start for a region's front door), any client connection may take it, and the
server fails with "address already in use"; a client connecting to such a port while nothing
listens may even connect to itself. So ports are chosen below that range, where the kernel never
assigns one by itself. The test suite's workers and a lab's processes choose ports at the same
time, so they take turns through one counter for the machine (a file under the temporary
directory, locked while it moves on): a port comes round again only after every other one in the
range, and one that something holds (checked by binding it) is passed over.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: the lowest port chosen: above the service ports a node of this machine holds (the kubelet's
#: 10250, the control plane's 10257 and 10259) and the fixed ports of ``magnetar kube up``'s nodes
#: (their port bases, 16440-20449)
LOWEST = 21_000
#: the highest: below Kubernetes' NodePort range (30000-32767), which kube-proxy may hold
HIGHEST = 29_999
RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range(path: Path = RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range, Linux's default where it cannot be read."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return 32_768, 60_999
    return low, high


def counter_file() -> Path:
    """The machine's counter, per user (asked at each call: a read-only root file system, as in a
    pod, has no temporary directory at all, and importing this module must not need one)."""
    return Path(tempfile.gettempdir()) / f"magnetar-next-port-{os.getuid()}"


def free_port(host: str = "127.0.0.1", counter: Path | None = None) -> int:
    """The next port in the machine's turn that nothing on ``host`` holds now, outside the
    ephemeral range. Falls back to the kernel's choice where that range leaves no room, or
    where there is no counter to keep."""
    highest = min(HIGHEST, ephemeral_range()[0] - 1)
    if highest - LOWEST < 1_000:
        return _kernel_port(host)
    try:
        fd = os.open(counter or counter_file(), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:  # no temporary directory (a read-only root file system), or another's file
        return _kernel_port(host)
    with _locked(fd):  # each call opens the file anew, so threads of one process wait too
        return _take(fd, host, highest)


def _take(fd: int, host: str, highest: int) -> int:
    """The counter's port, or the first after it that is free; the counter left past it."""
    text = os.read(fd, 32).decode(errors="replace").strip()
    port = int(text) if text.isdigit() else random.randint(LOWEST, highest)
    for _ in range(1_000):
        port = port if LOWEST <= port <= highest else LOWEST
        if _bindable(host, port):
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(port + 1).encode(), 0)
            return port
        port += 1
    raise OSError(f"no free port on {host} in {LOWEST}-{highest} after 1,000 tries")


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    """An exclusive lock (flock: one per open of the file) on ``fd``, closed after, and the lock
    with it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _kernel_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
