"""Where everything of one node lives and which addresses and ports it uses.

Every address is one this node creates: the bridge ``magnetar0`` with the gateway of the pod range,
on which the API server, the kubelet and CoreDNS listen, and a service range routed onto that bridge
so a Service IP with no endpoint never leaves the machine. Other ports are on 127.0.0.1, at fixed
offsets from ``port_base`` so a taken port can be named before anything starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# images/build.sh's cache too: MAGNETAR_CACHE, or magnetar/ under the XDG cache directory
CACHE = Path(
    os.environ.get(
        "MAGNETAR_CACHE", Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "magnetar"
    )
)
DEFAULT_STATE_DIR = CACHE / "kube" / "state"
IMAGES_DIR = CACHE / "images"

BRIDGE = "magnetar0"  # not cni0: nothing else on the machine should share it
POD_CIDR = "10.244.0.0/24"
NODE_IP = "10.244.0.1"  # the bridge's address, the pods' gateway, and the node's InternalIP
SERVICE_CIDR = "10.96.0.0/24"
CLUSTER_DOMAIN = "cluster.local"
NODE_NAME = "magnetar-node"
CNI_NETWORK = "magnetar-k8s"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
DEFAULT_PORT_BASE = 16440

#: port name -> offset from the port base; all on 127.0.0.1 but the API server's (on NODE_IP)
PORT_OFFSETS = {
    "kube-apiserver": 0,
    "etcd-client": 1,
    "etcd-peer": 2,
    "kube-controller-manager": 3,
    "kube-scheduler": 4,
    "kubelet-healthz": 5,
    "kube-proxy-healthz": 6,
    "kube-proxy-metrics": 7,
    "coredns-health": 8,
    "coredns-ready": 9,
}
#: ports on NODE_IP, fixed by Kubernetes conventions; free as long as no other node owns NODE_IP
NODE_IP_PORTS = {"kubelet": 10250, "dns": 53}


@dataclass(frozen=True)
class Layout:
    state_dir: Path
    port_base: int = DEFAULT_PORT_BASE

    def port(self, name: str) -> int:
        return self.port_base + PORT_OFFSETS[name]

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def control_plane(self) -> Path:
        return self.state_dir / "control-plane"

    @property
    def containerd(self) -> Path:
        return self.state_dir / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def cni(self) -> Path:
        return self.state_dir / "cni"

    @property
    def kubelet(self) -> Path:
        return self.state_dir / "kubelet"

    @property
    def volumes(self) -> Path:
        """The local PersistentVolumes' directories (volumes.py)."""
        return self.state_dir / "volumes"

    @property
    def config(self) -> Path:
        """Component configuration files and kubeconfigs."""
        return self.state_dir / "config"

    @property
    def api_url(self) -> str:
        return f"https://{NODE_IP}:{self.port('kube-apiserver')}"
