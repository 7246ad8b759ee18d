"""The one certificate pair the node needs besides the API server's own: the API server's client
certificate for the kubelet (logs, exec, port-forward), from a CA the kubelet trusts. Components
authenticate to the API server with tokens instead (``tokens.csv``), which needs no CA.

Made with the same small CA the rest of Magnetar uses (magnetar.common.certificates), anew at each
``up``: nothing outside this node trusts the CA, so there is nothing to keep."""

from __future__ import annotations

import datetime
from pathlib import Path

from magnetar.common.certificates import issue, new_ca

KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
VALIDITY = datetime.timedelta(days=365)


def kubelet_client(pki: Path) -> tuple[Path, Path, Path]:
    """(ca.crt, client.crt, client.key) under ``pki``."""
    pki.mkdir(parents=True, exist_ok=True)
    ca_key, ca = pki / "kubelet-client-ca.key", pki / "kubelet-client-ca.crt"
    key, crt = pki / "apiserver-kubelet-client.key", pki / "apiserver-kubelet-client.crt"
    authority = new_ca("magnetar-kubelet-client-ca", validity=VALIDITY)
    client = issue(authority, KUBELET_CLIENT_USER, validity=VALIDITY)
    for path, pem in ((ca_key, authority.key), (key, client.key)):
        path.touch(mode=0o600, exist_ok=True)
        path.chmod(0o600)
        path.write_bytes(pem)
    ca.write_bytes(authority.certificate)
    crt.write_bytes(client.certificate)
    return ca, crt, key
