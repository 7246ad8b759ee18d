"""A real Kubernetes control plane without nodes, as controller-runtime's envtest runs it: etcd and
kube-apiserver on loopback, token authentication, RBAC, and a kubeconfig for clients.

No kubelet and no controller manager run: nothing schedules pods, and no garbage collector
deletes owned objects. The binaries are the ones ``operator/testenv/build-k8s.sh`` caches.

``magnetar kube up`` starts the same control plane with ``with_nodes=True`` (nodes, controllers and
service-account tokens admitted), on its bridge address and fixed ports, detached from its caller.
"""

from __future__ import annotations

import os
import secrets
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from magnetar.common.ports import free_port

BIN = Path(os.environ.get("MAGNETAR_K8S_CACHE", Path.home() / ".cache" / "magnetar" / "k8s")) / "bin"


class ControlPlaneError(RuntimeError):
    pass


def binaries_missing(bin_dir: Path = BIN) -> list[str]:
    return [b for b in ("etcd", "kube-apiserver", "kubectl") if not (bin_dir / b).is_file()]


class ControlPlane:
    """etcd and kube-apiserver. The defaults are the operator suite's envtest; the keywords are what a
    cluster with nodes needs: ``address`` the API server binds and advertises (its Endpoints may not
    be loopback once a kubelet's pods use them), fixed ``ports`` (API server, etcd client, etcd peer),
    ``extra_tokens`` (token-file rows for the components), ``extra_args`` for the API server,
    ``detach`` (the processes outlive the caller, in their own session) and ``on_spawn`` (told each
    process as it starts, so the caller can record its PID before anything can fail)."""

    def __init__(
        self,
        workdir: Path,
        bin_dir: Path = BIN,
        *,
        address: str = "127.0.0.1",
        ports: tuple[int, int, int] | None = None,
        service_cidr: str = "10.0.0.0/24",
        with_nodes: bool = False,
        extra_tokens: Sequence[str] = (),
        extra_args: Sequence[str] = (),
        detach: bool = False,
        on_spawn: Callable[[str, subprocess.Popen[bytes]], None] | None = None,
    ) -> None:
        self.workdir = workdir
        self.bin_dir = bin_dir
        self.token = secrets.token_hex(16)
        self.kubeconfig = workdir / "kubeconfig"
        self.address = address
        self.port = ports[0] if ports else 0
        self._etcd_ports = ports[1:] if ports else None
        self.service_cidr = service_cidr
        self.with_nodes = with_nodes
        self.extra_tokens = list(extra_tokens)
        self.extra_args = list(extra_args)
        self.detach = detach
        self.on_spawn = on_spawn
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"https://{self.address}:{self.port}"

    def start(self, timeout_s: float = 90.0) -> None:
        missing = binaries_missing(self.bin_dir)
        if missing:
            raise ControlPlaneError(f"missing {missing} in {self.bin_dir}: run `make k8s-testenv`")
        self.workdir.mkdir(parents=True, exist_ok=True)
        etcd_url = self._start_etcd()
        self._start_apiserver(etcd_url)
        self._wait_ready(timeout_s)
        self._write_kubeconfig()

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [str(self.bin_dir / name), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=self.detach,
        )
        self._procs.append(proc)
        if self.on_spawn is not None:
            self.on_spawn(name, proc)

    def _start_etcd(self) -> str:
        client, peer = self._etcd_ports or (free_port(), free_port())
        url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        self._spawn(
            "etcd",
            [
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",  # a throw-away test store: durability buys nothing here
                "--log-level=warn",
            ],
        )
        return url

    def _start_apiserver(self, etcd_url: str) -> None:
        tokens = self.workdir / "tokens.csv"
        rows = [f'{self.token},admin,admin-uid,"system:masters"', *self.extra_tokens]
        tokens.write_text("".join(f"{row}\n" for row in rows))
        key, pub = self.workdir / "sa.key", self.workdir / "sa.pub"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
                       check=True, capture_output=True)  # fmt: skip
        self.port = self.port or free_port()
        if self.with_nodes:
            # Kubelets are authorized as their own node only; the controller manager mints tokens.
            mode = ["--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction"]
        else:
            # No controller manager mints service-account tokens: admit pods without them.
            mode = [
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount",
                "--endpoint-reconciler-type=none",
            ]
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                f"--cert-dir={self.workdir / 'certs'}",
                f"--secure-port={self.port}",
                f"--bind-address={self.address}",
                f"--advertise-address={self.address}",
                f"--service-cluster-ip-range={self.service_cidr}",
                "--allow-privileged=true",
                f"--token-auth-file={tokens}",
                f"--service-account-issuer={self.url}",
                f"--service-account-key-file={pub}",
                f"--service-account-signing-key-file={key}",
                *mode,
                *self.extra_args,
            ],
        )

    def _write_kubeconfig(self) -> None:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            # The API server's self-signed serving certificate, chained to its own CA, made at start.
            "clusters": [
                {
                    "name": "envtest",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority": str(self.workdir / "certs" / "apiserver.crt"),
                    },
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
            "current-context": "envtest",
        }
        self.kubeconfig.write_text(yaml.safe_dump(doc))

    def _wait_ready(self, timeout_s: float) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            for name, proc in zip(("etcd", "kube-apiserver"), self._procs, strict=False):
                if proc.poll() is not None:
                    self.stop()
                    raise ControlPlaneError(f"{name} exited: {self._tail()}")
            request = urllib.request.Request(
                f"{self.url}/readyz", headers={"Authorization": f"Bearer {self.token}"}
            )
            try:
                with urllib.request.urlopen(request, context=context, timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError as exc:
                last = str(exc)
            time.sleep(0.5)
        self.stop()
        raise ControlPlaneError(f"kube-apiserver not ready after {timeout_s}s ({last}): {self._tail()}")

    def _tail(self) -> str:
        parts = []
        for name in ("etcd", "kube-apiserver"):
            path = self.workdir / f"{name}.log"
            if path.exists():
                parts.append(
                    f"--- {name}:\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:])
                )
        return "\n".join(parts)

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def stop(self) -> None:
        for proc in reversed(self._procs):
            proc.terminate()
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
