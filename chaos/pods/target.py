"""A cluster directory whose processes are pods: ``kube.json`` written by ``write``, read live by
``live_state`` into the ``ClusterState`` every activity already understands."""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml
from chaoslib.exceptions import ActivityFailed

from magnetar.chaos.pods import KUBE_FILE as KUBE_FILE
from magnetar.chaos.pods import is_kube as is_kube
from magnetar.kube.control_plane import BIN
from magnetar.local.supervisor import ClusterState, ProcessRecord
from magnetar.operator.configs import BROKER_PORT, BROKER_WEB_PORT, ZOOKEEPER_PORT
from magnetar.operator.kube_api import api_client
from magnetar.operator.manifests import COMPONENT, INSTANCE, POD_IP_LISTENER
from magnetar.operator.resources import GROUP, VERSION

log = logging.getLogger("chaostoolkit")

#: how long a restarted pod's previous log is asked for again before it is given up
PREVIOUS_LOG_S = 10.0

CLUSTERS = "magnetarclusters"


@dataclass(frozen=True, order=True)
class ClusterRef:
    """One ``MagnetarCluster``: a region of the run."""

    name: str
    namespace: str = "default"

    @classmethod
    def parse(cls, text: str) -> ClusterRef:
        """``NAME`` or ``NAME@NAMESPACE``."""
        name, _, namespace = text.partition("@")
        return cls(name, namespace or "default")


@dataclass(frozen=True)
class KubeTarget:
    kubeconfig: str
    #: the node's containerd, which knows each container's host PID
    containerd_socket: str
    clusters: list[ClusterRef] = field(default_factory=list)

    @classmethod
    def load(cls, directory: Path) -> KubeTarget:
        doc = json.loads((directory / KUBE_FILE).read_text())
        return cls(doc["kubeconfig"], doc["containerd_socket"], [ClusterRef(**c) for c in doc["clusters"]])


def discover(kubeconfig: Path) -> list[ClusterRef]:
    """Every ``MagnetarCluster`` the kubeconfig's user can see, in every namespace."""
    from kubernetes import client

    custom: Any = client.CustomObjectsApi(api_client(str(kubeconfig)))
    found = custom.list_cluster_custom_object(GROUP, VERSION, CLUSTERS)["items"]
    return sorted(ClusterRef(c["metadata"]["name"], c["metadata"]["namespace"]) for c in found)


def write(directory: Path, kubeconfig: Path, containerd_socket: Path, clusters: list[ClusterRef]) -> Path:
    """Makes ``directory`` a cluster directory for the clusters' pods; checks they are there."""
    target = KubeTarget(str(kubeconfig.resolve()), str(containerd_socket), clusters)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / KUBE_FILE).write_text(json.dumps(asdict(target), indent=2))
    live_state(directory)  # a cluster that is not there fails here, before any experiment
    return directory


def container_pids(socket: str) -> dict[str, int]:
    """Container id -> host PID of its process, for every running container of the node."""
    listed = subprocess.run(
        ["ctr", "--address", socket, "--namespace", "k8s.io", "tasks", "list"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if listed.returncode != 0:
        why = listed.stderr.strip()
        raise ActivityFailed(f"the node's containerd at {socket} did not list its tasks: {why}")
    pids = {}
    for line in listed.stdout.splitlines()[1:]:
        task, pid, status = [*line.split(), "", "", ""][:3]
        if status == "RUNNING":
            pids[task] = int(pid)
    return pids


def live_state(directory: Path) -> ClusterState:
    """The clusters' pods as processes (a container that is not running has PID 0), each
    region's broker Service as its URLs, and the super-user's token when the cluster has one."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    target = KubeTarget.load(directory)
    api = api_client(target.kubeconfig)
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    pids = container_pids(target.containerd_socket)
    state = ClusterState(name="kubernetes", directory=str(directory))
    try:
        for ref in target.clusters:
            spec = custom.get_namespaced_custom_object(GROUP, VERSION, ref.namespace, CLUSTERS, ref.name)
            region = spec["spec"].get("clusterName") or ref.name
            pods = _pods(core, ref)
            state.processes += [_process(p, region, pids) for p in pods if p.metadata.labels.get(COMPONENT)]
            state.regions[region] = _region(core, ref)
            state.security |= _security(core, ref, directory)
    except ApiException as exc:
        raise ActivityFailed(f"Kubernetes answered {exc.status} {exc.reason}: {exc.body}") from None
    state.processes.sort(key=lambda p: p.name)
    return state


def _pods(core: Any, ref: ClusterRef) -> list[Any]:
    return list(core.list_namespaced_pod(ref.namespace, label_selector=f"{INSTANCE}={ref.name}").items)


def _process(pod: Any, region: str, pids: dict[str, int]) -> ProcessRecord:
    component = pod.metadata.labels[COMPONENT]
    ip = pod.status.pod_ip or ""
    container = _container_id(pod)
    endpoints = {}
    if component.startswith("broker") and ip:
        endpoints = {
            "service_url": f"pulsar://{ip}:{BROKER_PORT}",
            "web_service_url": f"http://{ip}:{BROKER_WEB_PORT}",
        }
    return ProcessRecord(
        name=pod.metadata.name,
        role="broker" if component.startswith("broker") else component,
        region=region,
        pid=pids.get(container, 0),
        log=f"pod/{pod.metadata.namespace}/{pod.metadata.name}",
        address=ip,
        endpoints=endpoints,
    )


def _container_id(pod: Any) -> str:
    """The id of the pod's container in the node's runtime ("" before it has one)."""
    statuses = pod.status.container_statuses or []  # one container a pod (operator/manifests.py)
    return (statuses[0].container_id or "").rpartition("//")[2] if statuses else ""


def _region(core: Any, ref: ClusterRef) -> dict[str, str]:
    """The broker Service's URLs (its ClusterIP, which the node routes from the host) and the
    metadata store as the brokers see it, its host name replaced by the ZooKeeper Service's IP."""
    broker = core.read_namespaced_service(f"{ref.name}-broker", ref.namespace)
    ports = {p.name: p.port for p in broker.spec.ports}
    ip = broker.spec.cluster_ip
    info = {
        "service_url": f"pulsar://{ip}:{ports.get('pulsar', BROKER_PORT)}",
        "web_service_url": f"http://{ip}:{ports.get('http', BROKER_WEB_PORT)}",
        # lookups answer the pods' DNS names, which this machine cannot resolve: their IPs
        "listener_name": POD_IP_LISTENER,
    }
    config = core.read_namespaced_config_map(f"{ref.name}-broker", ref.namespace).data["broker.yaml"]
    store = urlsplit(str(yaml.safe_load(config)["metadata_store_url"]))
    host = (store.hostname or "").split(".")[0]
    if host == f"{ref.name}-zookeeper":
        zookeeper = core.read_namespaced_service(host, ref.namespace).spec.cluster_ip
        store = store._replace(netloc=f"{zookeeper}:{store.port or ZOOKEEPER_PORT}")
    info["metadata_store"] = urlunsplit(store)
    return info


def _security(core: Any, ref: ClusterRef, directory: Path) -> dict[str, str]:
    """The operator's super-user token (``<name>-superuser-token``), kept in a file beside
    ``kube.json`` for the workload and the admin calls; none for a cluster without tokens."""
    from kubernetes.client.exceptions import ApiException

    try:
        secret = core.read_namespaced_secret(f"{ref.name}-superuser-token", ref.namespace)
    except ApiException as exc:
        if exc.status == 404:
            return {}
        raise
    token, value = directory / f"{ref.namespace}-{ref.name}.token", base64.b64decode(secret.data["token"])
    if not token.exists() or token.read_bytes() != value:  # read live by every activity: written once
        token.write_bytes(value)
        token.chmod(0o600)
    return {"auth_plugin": "token", "auth_params": f"file://{token}"}


def wait_running(
    directory: Path,
    name: str,
    timeout_s: float,
    *,
    replacing: str | None = None,
    restarting: str | None = None,
) -> ProcessRecord:
    """Waits until the kubelet has the pod's container running and the pod Ready; where a local
    cluster would start the process again. ``replacing``: the UID of a deleted pod, whose
    successor of the same name is the one awaited; ``restarting``: the id of a stopped
    container, whose successor in the same pod is the one awaited."""
    from kubernetes import client

    target = KubeTarget.load(directory)
    core: Any = client.CoreV1Api(api_client(target.kubeconfig))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(_running_and_ready(pod, target) for ref in target.clusters for pod in _pods(core, ref)
               if pod.metadata.name == name and pod.metadata.uid != replacing
               and _container_id(pod) != restarting):  # fmt: skip
            return next(p for p in live_state(directory).processes if p.name == name)
        time.sleep(0.5)
    again = "made again, running and Ready" if replacing else "running and Ready again"
    raise ActivityFailed(f"pod {name} not {again} within {timeout_s:.0f}s")


def _running_and_ready(pod: Any, target: KubeTarget) -> bool:
    ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
    return ready and _process(pod, "", container_pids(target.containerd_socket)).pid != 0


def stop_container(directory: Path, name: str, grace_period_s: int) -> str:
    """Stops the pod's container through the node's CRI, as the kubelet itself would (``crictl
    stop``: SIGTERM, then SIGKILL after ``grace_period_s``; 0 kills it at once); its id. The
    kubelet starts a new container in the same pod, with the same address and volumes."""
    target = KubeTarget.load(directory)
    container = _container_id(_pod(target, name))
    if not container:
        raise ActivityFailed(f"pod {name} has no container to stop")
    stopped = subprocess.run(
        [str(BIN / "crictl"), "--runtime-endpoint", f"unix://{target.containerd_socket}", "--timeout", "30s",
         "stop", "--timeout", str(grace_period_s), container],
        capture_output=True, text=True, timeout=grace_period_s + 60,
    )  # fmt: skip
    if stopped.returncode != 0:
        why = stopped.stderr.strip() or stopped.stdout.strip()
        raise ActivityFailed(f"the node's CRI did not stop {name}'s container {container[:13]}: {why}")
    return container


def _pod(target: KubeTarget, name: str) -> Any:
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client(target.kubeconfig))
    for ref in target.clusters:
        for pod in _pods(core, ref):
            if pod.metadata.name == name:
                return pod
    raise ActivityFailed(f"no pod {name} in {', '.join(f'{r.name}@{r.namespace}' for r in target.clusters)}")


def delete_pod(directory: Path, name: str, grace_period_s: int | None) -> str:
    """Deletes the pod as ``kubectl delete pod`` does (its StatefulSet makes it again); its UID.
    ``grace_period_s``: None for the pod's own termination grace period, 0 to kill at once."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    target = KubeTarget.load(directory)
    pod = _pod(target, name)
    core: Any = client.CoreV1Api(api_client(target.kubeconfig))
    try:
        core.delete_namespaced_pod(name, pod.metadata.namespace, grace_period_seconds=grace_period_s)
    except ApiException as exc:
        raise ActivityFailed(f"deleting pod {name}: Kubernetes answered {exc.status} {exc.reason}") from None
    return str(pod.metadata.uid)


def pod_logs(directory: Path, destination: Path) -> None:
    """Every pod's log (and its previous container's, after a restart) into ``destination``."""
    from kubernetes import client

    target = KubeTarget.load(directory)
    core: Any = client.CoreV1Api(api_client(target.kubeconfig))
    destination.mkdir(parents=True, exist_ok=True)
    for ref in target.clusters:
        for pod in _pods(core, ref):
            restarted = any((s.restart_count or 0) > 0 for s in pod.status.container_statuses or [])
            for previous in (True, False):
                # a restarted container has a previous log: a refusal of it is retried, then logged
                retry_s = PREVIOUS_LOG_S if previous and restarted else 0
                text = _pod_log(core, pod.metadata.name, ref.namespace, previous, retry_s)
                if text is not None:
                    suffix = ".previous.log" if previous else ".log"
                    (destination / f"{pod.metadata.name}{suffix}").write_text(text)


def _pod_log(core: Any, pod: str, namespace: str, previous: bool, retry_s: float) -> str | None:
    """The pod's (previous) container's log; None if there is none (no previous container, the pod
    gone), or if the API still refuses it after ``retry_s`` (logged with its answer)."""
    from kubernetes.client.exceptions import ApiException

    deadline = time.monotonic() + retry_s
    while True:
        try:
            return str(core.read_namespaced_pod_log(pod, namespace, previous=previous))
        except ApiException as exc:
            if time.monotonic() >= deadline:
                if retry_s:
                    log.warning("pod %s restarted, but its previous container's log could not be read: "
                                "Kubernetes answered %s %s %s", pod, exc.status, exc.reason,
                                (exc.body or "")[:300])  # fmt: skip
                return None
        time.sleep(0.5)
