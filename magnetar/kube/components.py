"""Configuration and command lines of the node's components: kube-controller-manager,
kube-scheduler, kubelet, kube-proxy and CoreDNS, each with its own identity (a token in the API
server's token file, the user name Kubernetes' bootstrap RBAC already binds) and kubeconfig."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from magnetar.kube.kubelet_client_certificate import KUBELET_CLIENT_USER
from magnetar.kube.layout import (
    CLUSTER_DOMAIN,
    NODE_IP,
    NODE_NAME,
    PAUSE_IMAGE,
    POD_CIDR,
    SERVICE_CIDR,
    Layout,
)

#: component -> (user, groups): the users Kubernetes' bootstrap ClusterRoleBindings name
IDENTITIES = {
    "kube-controller-manager": ("system:kube-controller-manager", ""),
    "kube-scheduler": ("system:kube-scheduler", ""),
    "kubelet": (f"system:node:{NODE_NAME}", "system:nodes"),
    "kube-proxy": ("system:kube-proxy", ""),
    "coredns": ("system:coredns", ""),
}

#: what the API server does not bind by itself: CoreDNS's read access (as in CoreDNS's own
#: deployment manifest), the API server's access to the kubelet, and Kubernetes' own
#: ``system:node`` role for the node. The Node authorizer lets a kubelet read a pod's claims,
#: ConfigMaps and Secrets only once its graph has the pod; a kubelet that asks first (a pod just
#: bound to the node) was refused, and retried the pod only after its 10 s back-off. With one
#: node, every pod is this node's: the role grants nothing the authorizer would not
RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:coredns"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "magnetar:kube-apiserver-kubelet-client"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "KUBELET_CLIENT_USER"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "magnetar:node"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:node"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "NODE_USER"}
""".replace("KUBELET_CLIENT_USER", KUBELET_CLIENT_USER).replace("NODE_USER", IDENTITIES["kubelet"][0])


@dataclass
class Identities:
    tokens: dict[str, str] = field(default_factory=lambda: {c: secrets.token_hex(16) for c in IDENTITIES})

    def token_rows(self) -> list[str]:
        rows = []
        for component, (user, groups) in IDENTITIES.items():
            row = f"{self.tokens[component]},{user},{user}"
            rows.append(f'{row},"{groups}"' if groups else row)
        return rows


def kubeconfig(layout: Layout, ca: Path, user: str, token: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "magnetar", "cluster": {"server": layout.api_url, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "magnetar", "context": {"cluster": "magnetar", "user": user}}],
        "current-context": "magnetar",
    }


def write_kubeconfigs(layout: Layout, ca: Path, identities: Identities) -> dict[str, Path]:
    layout.config.mkdir(parents=True, exist_ok=True)
    paths = {}
    for component, (user, _) in IDENTITIES.items():
        path = layout.config / f"{component}.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig(layout, ca, user, identities.tokens[component])))
        path.chmod(0o600)
        paths[component] = path
    return paths


def controller_manager_args(layout: Layout, cp_dir: Path, ca: Path) -> list[str]:
    kubeconfig_path = str(layout.config / "kube-controller-manager.kubeconfig")
    return [
        f"--kubeconfig={kubeconfig_path}",
        f"--authentication-kubeconfig={kubeconfig_path}",
        f"--authorization-kubeconfig={kubeconfig_path}",
        "--bind-address=127.0.0.1",
        f"--secure-port={layout.port('kube-controller-manager')}",
        f"--cert-dir={layout.config / 'kube-controller-manager-certs'}",
        # Each controller acts as its own service account, as in a kubeadm cluster; the token
        # controller signs their tokens (and every pod's) with the key the API server verifies.
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={cp_dir / 'sa.key'}",
        f"--root-ca-file={ca}",
        f"--cluster-cidr={POD_CIDR}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allocate-node-cidrs=false",  # the one node's range is the CNI config's
        "--leader-elect=false",
    ]


def scheduler_args(layout: Layout) -> list[str]:
    kubeconfig_path = str(layout.config / "kube-scheduler.kubeconfig")
    return [
        f"--kubeconfig={kubeconfig_path}",
        f"--authentication-kubeconfig={kubeconfig_path}",
        f"--authorization-kubeconfig={kubeconfig_path}",
        "--bind-address=127.0.0.1",
        f"--secure-port={layout.port('kube-scheduler')}",
        f"--cert-dir={layout.config / 'kube-scheduler-certs'}",
        "--leader-elect=false",
    ]


def kubelet_config(layout: Layout, client_ca: Path) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": layout.port("kubelet-healthz"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        # What this machine allows (measured): no systemd, no QoS cgroup tree, no swap check, no
        # node-allocatable enforcement, no ephemeral-storage accounting.
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "failSwapOn": False,
        "localStorageCapacityIsolation": False,
        "clusterDNS": [NODE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        # The pods' DNS settings derive from this file, not the machine's: CoreDNS on the bridge only.
        "resolvConf": str(layout.config / "resolv.conf"),
        "podLogsDir": str(layout.state_dir / "pod-logs"),
        # Images here cannot be pulled again: never collect them, never evict for a full disk.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "serializeImagePulls": False,
        "rotateCertificates": False,
        "registerNode": True,
    }


def write_kubelet_config(layout: Layout, client_ca: Path) -> Path:
    (layout.config / "resolv.conf").write_text(f"nameserver {NODE_IP}\n")
    path = layout.config / "kubelet.yaml"
    path.write_text(yaml.safe_dump(kubelet_config(layout, client_ca)))
    return path


def kubelet_args(layout: Layout) -> list[str]:
    return [
        f"--config={layout.config / 'kubelet.yaml'}",
        f"--kubeconfig={layout.config / 'kubelet.kubeconfig'}",
        f"--root-dir={layout.kubelet}",
        f"--cert-dir={layout.kubelet / 'pki'}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={NODE_IP}",
        # The sandbox image is imported, never pulled; named so image GC keeps it.
        f"--pod-infra-container-image={PAUSE_IMAGE}",
    ]


def kube_proxy_config(layout: Layout) -> dict[str, object]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(layout.config / "kube-proxy.kubeconfig")},
        "hostnameOverride": NODE_NAME,
        "clusterCIDR": POD_CIDR,
        "healthzBindAddress": f"127.0.0.1:{layout.port('kube-proxy-healthz')}",
        "metricsBindAddress": f"127.0.0.1:{layout.port('kube-proxy-metrics')}",
        "nodePortAddresses": [f"{NODE_IP}/32"],  # NodePorts on the bridge address only
        # Leave the machine's conntrack table and route_localnet alone.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
    }


def write_kube_proxy_config(layout: Layout) -> Path:
    path = layout.config / "kube-proxy.yaml"
    path.write_text(yaml.safe_dump(kube_proxy_config(layout)))
    return path


def kube_proxy_args(layout: Layout) -> list[str]:
    return [f"--config={layout.config / 'kube-proxy.yaml'}"]


def corefile(layout: Layout) -> str:
    # Cluster names only: no `forward`, so a name outside the cluster is never asked of anyone else.
    return f"""{CLUSTER_DOMAIN}:53 in-addr.arpa:53 {{
    bind {NODE_IP}
    errors
    health 127.0.0.1:{layout.port("coredns-health")}
    ready 127.0.0.1:{layout.port("coredns-ready")}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa {{
        kubeconfig {layout.config / "coredns.kubeconfig"} magnetar
        pods insecure
    }}
    cache 30
    loadbalance
}}
.:53 {{
    bind {NODE_IP}
    errors
}}
"""


def write_corefile(layout: Layout) -> Path:
    path = layout.config / "Corefile"
    path.write_text(corefile(layout))
    return path


def coredns_args(layout: Layout) -> list[str]:
    return ["-conf", str(layout.config / "Corefile")]
