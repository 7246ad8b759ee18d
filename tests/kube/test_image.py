"""The images ``make image`` builds, as a user (or the kubelet) would notice them: Magnetar's runs
``magnetar`` as uid 10000, ZooKeeper's answers on its port when started the way the operator starts
it, a bookie of the one registers in the other and passes its readiness probe, and the pause image
sits still until SIGTERM and reaps orphans.

They run on the private dockerd of ``images/build.sh`` (reused when it is running, otherwise
started here and stopped afterwards), with host networking bound to 127.0.0.1: that dockerd has no
bridge. The tarballs are loaded first, so what is checked is what a node would import.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from magnetar.common.ports import free_port
from magnetar.local.zookeeper import four_letter_word

pytestmark = pytest.mark.kube

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "images" / "build.sh"
# images/build.sh's cache: MAGNETAR_CACHE, or magnetar/ under the XDG cache directory
_XDG_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
CACHE = Path(os.environ.get("MAGNETAR_CACHE", _XDG_CACHE / "magnetar"))
SOCKET = CACHE / "docker" / "docker.sock"
MAGNETAR = "magnetar:0.1.0"
ZOOKEEPER = "magnetar/zookeeper:3.8"
PAUSE = "registry.k8s.io/pause:3.10"
TARBALLS = {
    MAGNETAR: CACHE / "images" / "magnetar-0.1.0.tar",
    ZOOKEEPER: CACHE / "images" / "zookeeper-3.8.tar",
    PAUSE: CACHE / "images" / "pause-3.10.tar",
}


def docker(*args: str, timeout_s: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "-H", f"unix://{SOCKET}", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=check,
    )


@pytest.fixture(scope="module")
def images() -> Iterator[None]:
    """The three images, loaded from their tarballs into a running private dockerd."""
    missing = [str(path) for path in TARBALLS.values() if not path.is_file()]
    if missing:
        pytest.skip(f"no image tarballs ({', '.join(missing)}): run `make image` first")
    if os.geteuid() != 0 or shutil.which("dockerd") is None or shutil.which("docker") is None:
        pytest.skip("needs root and Debian's docker.io (`make image` installs it)")
    running = subprocess.run(["bash", str(BUILD), "dockerd", "status"], check=False).returncode == 0
    if not running:
        subprocess.run(["bash", str(BUILD), "dockerd", "start"], check=True, timeout=120)
    try:
        for tarball in TARBALLS.values():
            docker("load", "--quiet", "--input", str(tarball), timeout_s=300)
        yield
    finally:
        if not running:
            subprocess.run(["bash", str(BUILD), "dockerd", "stop"], check=True, timeout=60)


@contextlib.contextmanager
def container(*args: str) -> Iterator[str]:
    """``docker run --detach`` on the host's network; the container is removed (by ID) afterwards."""
    container_id = docker("run", "--detach", "--network", "host", *args).stdout.strip()
    try:
        yield container_id
    finally:
        docker("rm", "--force", container_id, check=False)


def logs(container_id: str) -> str:
    result = docker("logs", container_id, check=False)
    return (result.stdout + result.stderr)[-3000:]


@pytest.mark.usefixtures("images")
def test_magnetar_runs_as_uid_10000() -> None:
    ids = docker("run", "--rm", "--network", "host", "--entrypoint", "sh", MAGNETAR, "-c", "id -u; id -g")
    assert ids.stdout.split() == ["10000", "10000"]


@pytest.mark.usefixtures("images")
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "bookie"),  # the image's CMD is --help
        (("bookie", "--help"), "--journal-dir"),
        (("broker", "--help"), "Usage"),
        (("operator", "--help"), "Usage"),
        (("workload", "--help"), "Usage"),  # the official client is in the image
    ],
)
def test_magnetar_commands_start(args: tuple[str, ...], expected: str) -> None:
    """Through the entrypoint, as a pod's args run (its root file system read-only, as the operator
    renders it): each component imports and answers --help."""
    result = docker("run", "--rm", "--read-only", "--network", "host", MAGNETAR, *args, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert expected in result.stdout


@pytest.mark.usefixtures("images")
def test_zookeeper_starts_as_the_operator_starts_it() -> None:
    port = free_port()
    with zookeeper_server(port) as zk:
        assert "Mode: standalone" in wait_serving(zk, port)
        assert four_letter_word("127.0.0.1", port, "ruok") == "imok"
        assert docker("exec", zk, "cat", "/data/myid").stdout.strip() == "1"
        assert docker("exec", zk, "id", "-u").stdout.strip() == "10000"


@pytest.mark.usefixtures("images")
def test_a_bookie_registers_in_zookeeper_and_is_ready() -> None:
    """Both images together, as a pod pair would run: the bookie (read-only root, its data on a
    volume of uid 10000) registers in ZooKeeper, its readiness probe passes, the shell lists it."""
    zk_port, bookie_port, http_port = free_port(), free_port(), free_port()
    metadata = f"zk://127.0.0.1:{zk_port}/magnetar"
    with zookeeper_server(zk_port) as zk:
        wait_serving(zk, zk_port)
        with container(
            "--read-only", "--tmpfs", "/data:uid=10000,gid=10000",
            "--env", f"MAGNETAR_BOOKIE_BOOKIE_PORT={bookie_port}",
            "--env", f"MAGNETAR_BOOKIE_PROMETHEUS_STATS_HTTP_PORT={http_port}",
            "--env", "MAGNETAR_BOOKIE_ADVERTISED_ADDRESS=127.0.0.1",
            MAGNETAR, "bookie", "--journal-dir", "/data/journal", "--ledger-dir", "/data/ledgers",
            "--metadata-service-uri", metadata,
        ) as bookie:  # fmt: skip
            deadline = time.monotonic() + 60
            while "bookie ready" not in logs(bookie):
                assert time.monotonic() < deadline, f"bookie not ready in 60 s:\n{logs(bookie)}"
                time.sleep(0.5)
            # the operator's readiness probe: BookKeeper's is_ready, writable and registered
            url = f"http://127.0.0.1:{http_port}/api/v1/bookie/is_ready"
            with urllib.request.urlopen(url, timeout=10) as probe:
                assert probe.status == 200
            listed = docker(
                "run", "--rm", "--network", "host", MAGNETAR, "shell", "-m", metadata, "listbookies"
            )
            assert f"127.0.0.1:{bookie_port}" in listed.stdout


def zookeeper_server(port: int) -> contextlib.AbstractContextManager[str]:
    """The ZooKeeper image serving on 127.0.0.1:``port``, started the way the operator's StatefulSet
    starts it (magnetar/operator/manifests.py: ZOO_MY_ID from the pod's ordinal, then the official
    image's entrypoint and ``zkServer.sh start-foreground``)."""
    set_id = 'export ZOO_MY_ID=$(( ${HOSTNAME##*-} + 1 )); exec /docker-entrypoint.sh "$@"'
    return container(
        "--env", "HOSTNAME=region-a-zookeeper-0",
        "--env", f"ZOO_SERVERS=server.1=127.0.0.1:{free_port()}:{free_port()};127.0.0.1:{port}",
        "--env", "ZOO_4LW_COMMANDS_WHITELIST=ruok,srvr",
        "--env", "JVMFLAGS=-Xmx128m",
        "--entrypoint", "sh",
        ZOOKEEPER, "-c", set_id, "--", "zkServer.sh", "start-foreground",
    )  # fmt: skip


def wait_serving(zk: str, port: int) -> str:
    """``srvr``'s answer once the server serves (``ruok`` answers imok as soon as the port is open)."""
    deadline = time.monotonic() + 90
    answer = ""
    while time.monotonic() < deadline and "Zookeeper version" not in answer:
        with contextlib.suppress(OSError):
            answer = four_letter_word("127.0.0.1", port, "srvr")
        if "Zookeeper version" not in answer:
            state = docker("inspect", "--format", "{{.State.Running}}", zk).stdout.strip()
            assert state == "true", f"ZooKeeper exited:\n{logs(zk)}"
            time.sleep(0.5)
    assert "Zookeeper version: 3.8" in answer, f"not serving on 127.0.0.1:{port} in 90 s:\n{logs(zk)}"
    return answer


def wait_for_handlers(container_id: str, *signals: signal.Signals) -> None:
    """Until the container's process catches ``signals``: PID 1 of a PID namespace ignores any signal
    it has no handler for, so one sent before pause installed them would be lost."""
    pid = docker("inspect", "--format", "{{.State.Pid}}", container_id).stdout.strip()
    wanted = sum(1 << (sig - 1) for sig in signals)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
        if caught & wanted == wanted:
            return
        time.sleep(0.05)
    raise AssertionError(f"pause (pid {pid}) does not catch {signals}:\n{logs(container_id)}")


@pytest.mark.usefixtures("images")
@pytest.mark.parametrize("name", ["TERM", "INT"])
def test_pause_exits_promptly_on_a_stop_signal(name: str) -> None:
    with container(PAUSE) as pause:
        wait_for_handlers(pause, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)
        started = time.monotonic()
        docker("kill", "--signal", name, pause)
        exit_code = docker("wait", pause, timeout_s=10).stdout.strip()
        assert time.monotonic() - started < 3
        assert exit_code == "0", logs(pause)


@pytest.mark.usefixtures("images")
def test_pause_reaps_orphans_of_its_pod() -> None:
    """A process orphaned in the pod's shared PID namespace is re-parented to pause (PID 1), which
    must reap it when it exits: no zombie is left."""
    with container(PAUSE) as pause:
        wait_for_handlers(pause, signal.SIGCHLD)
        check = (
            "(sleep 0.3 &); sleep 2; "  # the subshell exits at once: its sleep is an orphan
            "for stat in /proc/[0-9]*/stat; do read -r line <$stat 2>/dev/null || continue; "
            'case "$line" in *") Z "*) echo "zombie: $line";; esac; done; '
            "cat /proc/1/comm"
        )
        result = docker(
            "run", "--rm", "--network", "host", "--pid", f"container:{pause}",
            "--entrypoint", "sh", MAGNETAR, "-c", check,
        )  # fmt: skip
        assert result.stdout.split() == ["pause"], result.stdout + result.stderr
