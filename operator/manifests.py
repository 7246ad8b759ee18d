"""The Kubernetes objects one ``MagnetarCluster`` becomes: a ZooKeeper ensemble (unless the
metadata store is external), bookies with their volumes, brokers and read-only brokers, their
Services, ConfigMaps and PodDisruptionBudgets.

Every pod runs as user 10000 with a read-only root filesystem (writable volumes for data and
``/tmp``). ZooKeeper's, whatever user its image was made for, writes its configuration into a
directory of its own (the official image's ``/conf`` is not writable by that user). Bookies and
brokers mount the cluster's Secrets (cluster_secrets.py) read-only, mode 0440; their ConfigMaps
name the mounted files, never a secret's value.

Bookie and broker StatefulSets use the ``OnDelete`` update strategy: the operator itself restarts
their pods one at a time, in order, after the checks a restart needs (no under-replicated ledger
for bookies, bundles moved away for brokers). A pod is out of date when its
``magnetar.dev/config-hash`` differs from its StatefulSet's template.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from magnetar.operator import cluster_secrets, configs
from magnetar.operator.cluster_secrets import INTERNAL_LISTENER, Security
from magnetar.operator.resources import ClusterSpec, Placement, Resources

CONFIG_HASH = "magnetar.dev/config-hash"
#: the pod template's record of the last restart the spec asked for (``restartedAt``)
RESTARTED_AT = "magnetar.dev/restarted-at"
COMPONENT = "app.kubernetes.io/component"
INSTANCE = "app.kubernetes.io/instance"
#: the order the operator brings a cluster up and restarts it: storage before serving
ROLL_ORDER = ("zookeeper", "bookie", "broker", "broker-readonly")

Manifest = dict[str, Any]


def labels(name: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "magnetar",
        INSTANCE: name,
        COMPONENT: component,
        "app.kubernetes.io/managed-by": "magnetar-operator",
    }


#: the node label the default spread is over, and the one the default anti-affinity is by
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


#: a bookie pod's rack, ``/<zone>``, which the operator writes once the pod is on a node (racks.py)
RACK = "magnetar.dev/rack"
#: the node label a bookie pod's rack is read from (the spec's ``bookies.rackNodeLabel``)
RACK_NODE_LABEL = "magnetar.dev/rack-node-label"


def placement(name: str, component: str, given: Placement) -> dict[str, Any]:
    """A component's ``affinity`` and ``topologySpreadConstraints``: what the spec gives, else
    the defaults. Both defaults are soft (preferred, ScheduleAnyway), so a one-node cluster still
    schedules every pod: the scheduler spreads a component's pods over hosts and zones where it
    can, and a lost node or zone then takes as few of them as the cluster's shape allows."""

    def own() -> dict[str, Any]:  # a copy each: a rendered manifest shares no object
        return {"labelSelector": {"matchLabels": {INSTANCE: name, COMPONENT: component}}}

    affinity = given.affinity
    if affinity is None:
        term = {"topologyKey": HOSTNAME} | own()
        affinity = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]
            }
        }
    spread = given.topology_spread_constraints
    if spread is None:
        spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"} | own()]
    return {"affinity": affinity, "topologySpreadConstraints": spread}


def selector(name: str, component: str) -> str:
    return f"{INSTANCE}={name},{COMPONENT}={component}"


def render_cluster(
    spec: ClusterSpec, name: str, namespace: str, secured: Security | None = None
) -> list[Manifest]:
    """Every object of a managed cluster, in the order they are applied; ``secured``: the Secrets
    the pods mount (default: those the spec names, revision unknown)."""
    secured = secured or cluster_secrets.planned(spec, name)
    objs: list[Manifest] = []
    if not spec.metadata_store.url:
        objs += _zookeeper(spec, name)
    objs += _bookies(spec, name, namespace, secured)
    # autoscaled: the count to make the StatefulSet with (clusters.py keeps one that runs)
    scaling = spec.brokers.autoscaling
    brokers = scaling.min if scaling is not None else spec.brokers.replicas
    objs += _brokers(spec, name, namespace, "broker", brokers, secured)
    if spec.brokers.read_only_replicas:
        objs += _brokers(spec, name, namespace, "broker-readonly", spec.brokers.read_only_replicas, secured)
    autoscaler = broker_autoscaler(spec, name)
    if autoscaler is not None:
        objs.append(autoscaler)
    return objs


#: the pods' user and group (the image's), and the group their volumes are readable by
RUN_AS = 10000
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": RUN_AS,
    "runAsGroup": RUN_AS,
    "fsGroup": RUN_AS,
    "seccompProfile": {"type": "RuntimeDefault"},
}


#: every container's: nothing written outside its volumes, no privilege at all
CONTAINER_SECURITY = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}

#: ZooKeeper's own configuration directory, an emptyDir its entrypoint writes zoo.cfg into. The
#: official image's /conf belongs to its user (uid 1000, mode 0755), so the pods' user cannot
#: write it; the image's logging configuration stays there, on the class path.
ZOOKEEPER_CONF_DIR = "/var/lib/zookeeper/conf"
#: the data volume: snapshots and myid, and below them the transaction log (the images' default
#: /datalog is a directory of the container, which a restart of the container loses)
ZOOKEEPER_DATA_DIR = "/data"
ZOOKEEPER_DATA_LOG_DIR = "/data/txnlog"


def _secret_volume(volume: str, secret: str, keys: tuple[str, ...]) -> dict[str, Any]:
    return {
        "name": volume,
        "secret": {
            "secretName": secret,
            "defaultMode": cluster_secrets.SECRET_MODE,
            "items": [{"key": k, "path": k} for k in keys],
        },
    }


def _secured(secured: Security, component: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Secret volumes and read-only mounts of a component (``bookie`` or ``broker``)."""
    volumes, mounts = [], []
    if component == "broker" and secured.auth:
        volumes += [
            _secret_volume("token-key", secured.token_key_secret, (cluster_secrets.TOKEN_KEY_FILE,)),
            _secret_volume("token", secured.broker_token_secret, (cluster_secrets.TOKEN_FILE,)),
        ]
        mounts += [
            {"name": "token-key", "mountPath": cluster_secrets.TOKEN_KEY_DIR, "readOnly": True},
            {"name": "token", "mountPath": cluster_secrets.TOKEN_DIR, "readOnly": True},
        ]
    if secured.tls:
        volumes.append(_secret_volume("tls", secured.tls_secrets[component], cluster_secrets.TLS_KEYS))
        mounts.append({"name": "tls", "mountPath": cluster_secrets.TLS_DIR, "readOnly": True})
    return volumes, mounts


def _meta(name: str, component: str, obj_name: str) -> dict[str, Any]:
    return {"name": obj_name, "labels": labels(name, component)}


def _service(name: str, component: str, obj_name: str, ports: dict[str, int], *, headless: bool) -> Manifest:
    spec: dict[str, Any] = {
        "selector": labels(name, component),
        "ports": [{"name": n, "port": p, "targetPort": p} for n, p in ports.items()],
    }
    if headless:
        # Peers and clients find each pod by its stable DNS name, ready or not (bootstrap).
        spec |= {"clusterIP": "None", "publishNotReadyAddresses": True}
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, component, obj_name), "spec": spec}


def _pdb(name: str, component: str) -> Manifest:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(name, component, f"{name}-{component}"),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels(name, component)}},
    }


def _config_map(name: str, component: str, data: dict[str, str]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(name, component, f"{name}-{component}"),
        "data": data,
    }


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _statefulset(
    name: str,
    component: str,
    *,
    replicas: int,
    service: str,
    pod_spec: dict[str, Any],
    config: dict[str, str] | None,
    volumes: dict[str, tuple[str, str | None]],
    operator_rolls: bool,
    revision: str = "",
    restarted_at: str | None = None,
    placed: Placement | None = None,
    pod_annotations: dict[str, str] | None = None,
) -> Manifest:
    # the Secrets' revision restarts pods onto renewed certificates (bookies load them at start);
    # a restart asked for in the spec changes the hash as a configuration change would
    asked = [{RESTARTED_AT: restarted_at}] if restarted_at else []
    marks = [pod_annotations] if pod_annotations else []
    config_hash = _hash(pod_spec, config, volumes, *([revision] if revision else []), *asked, *marks)
    annotations = {CONFIG_HASH: config_hash} | ({RESTARTED_AT: restarted_at} if restarted_at else {})
    annotations |= pod_annotations or {}
    claims = [
        {
            "metadata": {"name": vol, "labels": labels(name, component)},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}},
                **({"storageClassName": sc} if sc else {}),
            },
        }
        for vol, (size, sc) in volumes.items()
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(name, component, f"{name}-{component}"),
        "spec": {
            "replicas": replicas,
            "serviceName": service,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"} if operator_rolls else {"type": "RollingUpdate"},
            "selector": {"matchLabels": labels(name, component)},
            "template": {
                "metadata": {"labels": labels(name, component), "annotations": annotations},
                # placement stays out of the hash: it matters when a pod is scheduled, so a new
                # default or override applies to pods as they are next made rather than
                # restarting every pod of the cluster (restartedAt moves them now)
                "spec": pod_spec | placement(name, component, placed or Placement()),
            },
            "volumeClaimTemplates": claims,
        },
    }


def _container(
    spec: ClusterSpec, component: str, args: list[str], ports: dict[str, int], resources: Resources
) -> dict[str, Any]:
    return {
        "name": component,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["/usr/local/bin/magnetar-entrypoint"],
        "args": args,
        "ports": [{"name": n, "containerPort": p} for n, p in ports.items()],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ],
        "resources": resources.render(),
        "securityContext": copy.deepcopy(CONTAINER_SECURITY),
    }


#: readiness as Pulsar's chart asks for it, by HTTP requests the kubelet makes itself (a command
#: run in the container every period cost a process and a runc exec each time): a bookie's
#: BookKeeper is_ready (registered and writable), a broker's /status.html; path and port name
_READY = {"bookie": ("/api/v1/bookie/is_ready", "metrics"), "broker": ("/status.html", "http")}


#: how often the kubelet probes: a pod that starts serving is ready (and the operator's next step
#: can follow) within 2 s, and a ready pod is marked not ready only after 16 s of failed probes, as
#: long as the default 3 failures 5 s apart took
PROBE_TIMING = {"periodSeconds": 2, "failureThreshold": 8}


def _health(component: str) -> dict[str, Any]:
    path, port = _READY[component]
    return {"httpGet": {"path": path, "port": port}, **PROBE_TIMING}


def _zookeeper(spec: ClusterSpec, name: str) -> list[Manifest]:
    zk = spec.metadata_store.zookeeper
    headless = f"{name}-zookeeper-headless"
    servers = " ".join(
        f"server.{i + 1}={name}-zookeeper-{i}.{headless}:2888:3888;{configs.ZOOKEEPER_PORT}"
        for i in range(zk.replicas)
    )
    zk_ports = {"client": configs.ZOOKEEPER_PORT, "peer": 2888, "election": 3888}
    # The official image takes its id from ZOO_MY_ID; a StatefulSet pod knows only its ordinal.
    set_id = 'export ZOO_MY_ID=$(( ${HOSTNAME##*-} + 1 )); exec /docker-entrypoint.sh "$@"'
    container = {
        "name": "zookeeper",
        "image": zk.image,
        "command": ["sh", "-c", set_id, "--"],
        # the configuration file named with its directory: zkServer.sh otherwise reads zoo.cfg
        # from the image's own ZOOCFGDIR (/conf), which keeps its logging configuration
        "args": ["zkServer.sh", "start-foreground", f"{ZOOKEEPER_CONF_DIR}/zoo.cfg"],
        "env": [
            {"name": "ZOO_SERVERS", "value": servers},
            {"name": "ZOO_4LW_COMMANDS_WHITELIST", "value": "ruok"},
            {"name": "ZOO_CONF_DIR", "value": ZOOKEEPER_CONF_DIR},
            {"name": "ZOO_DATA_DIR", "value": ZOOKEEPER_DATA_DIR},
            {"name": "ZOO_DATA_LOG_DIR", "value": ZOOKEEPER_DATA_LOG_DIR},
        ],
        "ports": [{"name": n, "containerPort": p} for n, p in zk_ports.items()],
        "readinessProbe": {"tcpSocket": {"port": configs.ZOOKEEPER_PORT}, **PROBE_TIMING},
        "volumeMounts": [
            {"name": "data", "mountPath": ZOOKEEPER_DATA_DIR},
            {"name": "conf", "mountPath": ZOOKEEPER_CONF_DIR},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "resources": zk.resources.render(),
        "securityContext": copy.deepcopy(CONTAINER_SECURITY),
    }
    pod_spec = {
        "containers": [container],
        "volumes": [{"name": "conf", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
        "securityContext": copy.deepcopy(POD_SECURITY),
    }
    sts = _statefulset(
        name,
        "zookeeper",
        replicas=zk.replicas,
        service=headless,
        pod_spec=pod_spec,
        config=None,
        volumes={"data": (zk.storage, None)},
        operator_rolls=False,
        placed=zk,
    )
    return [
        _service(name, "zookeeper", headless, zk_ports, headless=True),
        _service(name, "zookeeper", f"{name}-zookeeper", {"client": configs.ZOOKEEPER_PORT}, headless=False),
        _pdb(name, "zookeeper"),
        sts,
    ]


def _bookies(spec: ClusterSpec, name: str, namespace: str, secured: Security) -> list[Manifest]:
    b = spec.bookies
    data = {"bookie.yaml": configs.to_yaml(configs.bookie_settings(spec, name, namespace))}
    container = _container(
        spec,
        "bookie",
        ["bookie", "--config", "/etc/magnetar/bookie.yaml"],
        {"bookie": configs.BOOKIE_PORT, "metrics": configs.BOOKIE_METRICS_PORT},
        b.resources,
    )
    container["env"] += [
        # The entrypoint derives the advertised address and the rack from these.
        {"name": "MAGNETAR_SERVICE", "value": f"{name}-bookie"},
        {"name": "MAGNETAR_RACKS", "value": ",".join(b.racks)},
        # Registered beside its name, so ledger clients reach a bookie made again (its name, a new
        # IP) at its new address at once, without resolving the name.
        {"name": "MAGNETAR_BOOKIE_ADVERTISED_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    container["readinessProbe"] = _health("bookie")
    secret_volumes, secret_mounts = _secured(secured, "bookie")
    from_node = not b.racks and bool(b.rack_node_label)
    init: list[dict[str, Any]] = []
    pod_annotations: dict[str, str] = {}
    if from_node:
        # A node's labels are not in the downward API: the operator reads the node the pod was
        # scheduled to and writes the rack into the pod's annotation (racks.py). The bookie
        # registers its rack once, at start, so it waits for that annotation; the kubelet
        # refreshes the annotations volume when the pod changes, and the container's variable is
        # read from the annotation when the container starts, after the wait.
        container["env"].append(
            {
                "name": "MAGNETAR_BOOKIE_RACK",
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{RACK}']"}},
            }
        )
        init.append(
            {
                "name": "wait-for-rack",
                "image": spec.image,
                "imagePullPolicy": spec.image_pull_policy,
                "command": [
                    "sh",
                    "-c",
                    f"until grep -q '^{RACK}=' /etc/podinfo/annotations; do sleep 1; done",
                ],
                "volumeMounts": [{"name": "podinfo", "mountPath": "/etc/podinfo", "readOnly": True}],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
                "securityContext": copy.deepcopy(container["securityContext"]),
            }
        )
        secret_volumes.append(
            {
                "name": "podinfo",
                "downwardAPI": {
                    "items": [{"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]
                },
            }
        )
        pod_annotations[RACK_NODE_LABEL] = b.rack_node_label
    container["volumeMounts"] = [
        {"name": "config", "mountPath": "/etc/magnetar", "readOnly": True},
        # the working directory and /tmp: the root filesystem is read-only
        {"name": "scratch", "mountPath": configs.DATA},
        {"name": "journal", "mountPath": f"{configs.DATA}/journal"},
        {"name": "ledgers", "mountPath": f"{configs.DATA}/ledgers"},
        {"name": "tmp", "mountPath": "/tmp"},
        *secret_mounts,
    ]
    pod_spec = {
        **({"initContainers": init} if init else {}),
        "containers": [container],
        "volumes": [
            {"name": "config", "configMap": {"name": f"{name}-bookie"}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
            *secret_volumes,
        ],
        "securityContext": POD_SECURITY,
        "terminationGracePeriodSeconds": 60,
    }
    sc = b.storage.storage_class_name
    sts = _statefulset(
        name,
        "bookie",
        replicas=b.replicas,
        service=f"{name}-bookie",
        pod_spec=pod_spec,
        config=data,
        volumes={"journal": (b.storage.journal, sc), "ledgers": (b.storage.ledgers, sc)},
        operator_rolls=True,
        revision=secured.revision,
        restarted_at=b.restarted_at,
        placed=b,
        pod_annotations=pod_annotations,
    )
    ports = {"bookie": configs.BOOKIE_PORT, "metrics": configs.BOOKIE_METRICS_PORT}
    return [
        _config_map(name, "bookie", data),
        _service(name, "bookie", f"{name}-bookie", ports, headless=True),
        _pdb(name, "bookie"),
        sts,
    ]


#: the listener a client outside the cluster's DNS names (``listenerName``) to be sent to brokers by
#: pod IP: lookups otherwise answer with ``<pod>.<headless service>.<namespace>.svc``, a name only
#: the cluster resolves, while the pod range may well be routed to the client (a single-node
#: cluster's host, a peered network)
POD_IP_LISTENER = "pod-ip"


def _listeners(secured: Security, fqdn: str) -> list[dict[str, Any]]:
    """The pod-ip listener, and the internal one (cluster_secrets.INTERNAL_LISTENER) at the pod's DNS
    name ``fqdn``, which the operator's admin calls name."""
    urls = []
    for listener, host in ((POD_IP_LISTENER, "$(POD_IP)"), (INTERNAL_LISTENER, fqdn)):
        # the admin ports too: an admin call about what another broker owns is redirected to it
        urls += [
            f"{listener}:pulsar://{host}:{configs.BROKER_PORT}",
            f"{listener}:http://{host}:{configs.BROKER_WEB_PORT}",
        ]
        if secured.tls:
            urls += [
                f"{listener}:pulsar+ssl://{host}:{configs.BROKER_TLS_PORT}",
                f"{listener}:https://{host}:{configs.BROKER_WEB_TLS_PORT}",
            ]
    return [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        # $(POD_IP): the kubelet expands an earlier variable of the container
        {"name": "MAGNETAR_BROKER_ADVERTISED_LISTENERS", "value": ",".join(urls)},
    ]


def _brokers(
    spec: ClusterSpec, name: str, namespace: str, component: str, replicas: int, secured: Security
) -> list[Manifest]:
    settings = configs.broker_settings(spec, name, namespace)
    if component == "broker-readonly":
        settings["read_only_broker"] = True  # PIP-63: its own pool; it never takes writable bundles
    data = {"broker.yaml": configs.to_yaml(settings)}
    ports = {"pulsar": configs.BROKER_PORT, "http": configs.BROKER_WEB_PORT}
    if secured.tls:
        ports |= {"pulsar-tls": configs.BROKER_TLS_PORT, "https": configs.BROKER_WEB_TLS_PORT}
    container = _container(
        spec, "broker", ["broker", "--config", "/etc/magnetar/broker.yaml"], ports, spec.brokers.resources
    )
    container["env"] += [
        {"name": "MAGNETAR_SERVICE", "value": f"{name}-{component}-headless"},
        *_listeners(secured, f"$(POD_NAME).{name}-{component}-headless.{namespace}.svc"),
    ]
    container["readinessProbe"] = _health("broker")
    secret_volumes, secret_mounts = _secured(secured, "broker")
    container["volumeMounts"] = [
        {"name": "config", "mountPath": "/etc/magnetar", "readOnly": True},
        # the working directory and /tmp: the root filesystem is read-only
        {"name": "scratch", "mountPath": configs.DATA},
        {"name": "tmp", "mountPath": "/tmp"},
        *secret_mounts,
    ]
    pod_spec = {
        "containers": [container],
        "volumes": [
            {"name": "config", "configMap": {"name": f"{name}-{component}"}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
            *secret_volumes,
        ],
        "securityContext": POD_SECURITY,
        "terminationGracePeriodSeconds": 60,
    }
    sts = _statefulset(
        name,
        component,
        replicas=replicas,
        service=f"{name}-{component}-headless",
        pod_spec=pod_spec,
        config=data,
        volumes={},
        operator_rolls=True,
        revision=secured.revision,
        restarted_at=spec.brokers.restarted_at,
        placed=spec.brokers,
    )
    return [
        _config_map(name, component, data),
        _service(name, component, f"{name}-{component}-headless", ports, headless=True),
        _service(name, component, f"{name}-{component}", ports, headless=False),
        _pdb(name, component),
        sts,
    ]


def broker_autoscaler(spec: ClusterSpec, name: str) -> Manifest | None:
    """The HorizontalPodAutoscaler of the brokers' StatefulSet, for a CPU autoscaling target;
    None otherwise (no autoscaling, or the operator scales them on the load reports itself)."""
    scaling = spec.brokers.autoscaling
    if scaling is None or scaling.target.type != "CPU":
        return None
    utilization = {"type": "Utilization", "averageUtilization": scaling.target.average_utilization}
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(name, "broker", f"{name}-broker"),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": f"{name}-broker"},
            "minReplicas": scaling.min,
            "maxReplicas": scaling.max,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": utilization}}],
            "behavior": {
                "scaleDown": {"stabilizationWindowSeconds": scaling.scale_down_stabilization_seconds}
            },
        },
    }


def admin_url(spec: ClusterSpec, name: str, namespace: str) -> str:
    """Where the operator sends admin requests for this cluster."""
    if spec.external is not None:
        return spec.external.admin_url.rstrip("/")
    if spec.tls.enabled:
        return f"https://{name}-broker.{namespace}.svc:{configs.BROKER_WEB_TLS_PORT}"
    return f"http://{name}-broker.{namespace}.svc:{configs.BROKER_WEB_PORT}"
