"""The one certificate pair the node needs besides the API server's own: the API server's client
certificate for the kubelet (logs, exec, port-forward), from a CA the kubelet trusts. Components
authenticate to the API server with tokens instead (``tokens.csv``), which needs no CA."""

from __future__ import annotations

import subprocess
from pathlib import Path

KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def kubelet_client(pki: Path) -> tuple[Path, Path, Path]:
    """(ca.crt, client.crt, client.key) under ``pki``."""
    pki.mkdir(parents=True, exist_ok=True)
    ca_key, ca = pki / "kubelet-client-ca.key", pki / "kubelet-client-ca.crt"
    key, csr, crt = (
        pki / "apiserver-kubelet-client.key",
        pki / "client.csr",
        pki / "apiserver-kubelet-client.crt",
    )
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "365", "-subj",
             "/CN=magnetar-kubelet-client-ca", "-keyout", str(ca_key), "-out", str(ca))  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={KUBELET_CLIENT_USER}",
             "-keyout", str(key), "-out", str(csr))  # fmt: skip
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-days", "365", "-out", str(crt))  # fmt: skip
    return ca, crt, key
