"""The pod network: the CNI bridge plugin on ``magnetar0`` with host-local addresses from the pod
range, and portmap for host ports. Pods get routes to the pod and service ranges only: with no
default route, nothing a pod sends can leave the machine."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from magnetar.kube.layout import BRIDGE, CNI_NETWORK, NODE_IP, POD_CIDR, SERVICE_CIDR, Layout

NETNS_DIR = Path("/var/run/netns")  # where containerd's CRI puts pod network namespaces
CNI_CACHE = Path("/var/lib/cni/results")  # libcni's result cache, not configurable in containerd 1.6


def write_config(layout: Layout) -> Path:
    conf_dir = layout.cni / "net.d"
    conf_dir.mkdir(parents=True, exist_ok=True)
    conflist = {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,  # pods talk to the node and each other; never masqueraded outward
                "hairpinMode": True,  # a pod reaches itself through its own Service IP
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
                    "routes": [{"dst": SERVICE_CIDR}],
                    "dataDir": str(layout.cni / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    path = conf_dir / "10-magnetar.conflist"
    path.write_text(json.dumps(conflist, indent=2))
    return path


def remove_leftovers() -> list[str]:
    """Network namespaces of pods never torn down (those with an address in the pod range) and the
    CNI result cache entries of this network."""
    removed = []
    prefix = NODE_IP.rsplit(".", 1)[0] + "."
    for ns in sorted(NETNS_DIR.glob("cni-*")) if NETNS_DIR.is_dir() else []:
        out = subprocess.run(["ip", "-n", ns.name, "-o", "-4", "addr"], capture_output=True, text=True)
        if f"inet {prefix}" in out.stdout:
            subprocess.run(["ip", "netns", "delete", ns.name], capture_output=True)
            removed.append(f"netns {ns.name}")
    for entry in sorted(CNI_CACHE.glob(f"{CNI_NETWORK}-*")) if CNI_CACHE.is_dir() else []:
        entry.unlink(missing_ok=True)
        removed.append(f"cni cache {entry.name}")
    return removed
