"""Where a cluster's pods may run: every StatefulSet's pods carry the default soft anti-affinity
(by host) and zone spread of their own component, what a spec gives replaces those defaults, and
each bookie's rack is the zone of the node it was scheduled to. Against the real API server with
the mock kubelet (which makes pods from the StatefulSets' templates, as the controller would)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from magnetar.operator.manifests import COMPONENT, INSTANCE, RACK
from tests.operator.conftest import wait_for

COMPONENTS = ("zookeeper", "bookie", "broker", "broker-readonly")


def create(api: client.ApiClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    body = {"apiVersion": "magnetar.dev/v1alpha1", "kind": "MagnetarCluster", "metadata": {"name": name}}
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "magnetar.dev", "v1alpha1", namespace, "magnetarclusters", body | {"spec": spec}
    )


def pods_of(api: client.ApiClient, namespace: str, name: str, component: str) -> list[dict[str, Any]]:
    found = client.CoreV1Api(api).list_namespaced_pod(
        namespace, label_selector=f"{INSTANCE}={name},{COMPONENT}={component}"
    )
    return [client.ApiClient().sanitize_for_serialization(p) for p in found.items]


def every_pod(
    api: client.ApiClient, namespace: str, name: str, counts: dict[str, int]
) -> dict[str, list[Any]]:
    """The pods of each component, once each has as many as it should."""

    def made() -> dict[str, list[Any]] | None:
        pods = {c: pods_of(api, namespace, name, c) for c in counts}
        return pods if all(len(pods[c]) == n for c, n in counts.items()) else None

    found: dict[str, list[Any]] = wait_for(f"{name}'s pods", made)
    return found


SMALL = {
    "bookies": {"replicas": 2, "ensembleSize": 2, "writeQuorum": 2, "ackQuorum": 2},
    "brokers": {"replicas": 1, "readOnlyReplicas": 1},
}
COUNTS = {"zookeeper": 1, "bookie": 2, "broker": 1, "broker-readonly": 1}


def test_every_statefulsets_pods_get_soft_anti_affinity_and_zone_spread(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    create(api, k8s_namespace, "placed", SMALL)
    pods = every_pod(api, k8s_namespace, "placed", COUNTS)
    sets = client.AppsV1Api(api).list_namespaced_stateful_set(k8s_namespace).items
    assert sorted(s.metadata.labels[COMPONENT] for s in sets) == sorted(COMPONENTS)
    for component, members in pods.items():
        own = {"matchLabels": {INSTANCE: "placed", COMPONENT: component}}
        for pod in members:
            spec = pod["spec"]
            # soft: a one-node cluster still schedules every pod
            assert spec["affinity"] == {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "topologyKey": "kubernetes.io/hostname",
                                "labelSelector": own,
                            },
                        }
                    ]
                }
            }, component
            assert spec["topologySpreadConstraints"] == [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                 "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": own}
            ], component  # fmt: skip


def test_what_the_spec_gives_replaces_the_defaults(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    on_ssd = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                ]
            }
        }
    }
    apart = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {COMPONENT: "bookie"}}}]  # fmt: skip
    spec = {
        "bookies": SMALL["bookies"] | {"affinity": on_ssd, "topologySpreadConstraints": apart},
        "brokers": SMALL["brokers"] | {"topologySpreadConstraints": []},
    }
    create(api, k8s_namespace, "chosen", spec)
    pods = every_pod(api, k8s_namespace, "chosen", COUNTS)
    for bookie in pods["bookie"]:
        assert bookie["spec"]["affinity"] == on_ssd  # no anti-affinity added beside it
        assert bookie["spec"]["topologySpreadConstraints"] == apart
    for component in ("broker", "broker-readonly"):
        for broker in pods[component]:
            assert "topologySpreadConstraints" not in broker["spec"]  # [] given: none
            assert "podAntiAffinity" in broker["spec"]["affinity"]  # not given: the default
    zookeeper = pods["zookeeper"][0]["spec"]
    assert zookeeper["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"


@pytest.fixture
def nodes(api: client.ApiClient, k8s_namespace: str) -> Iterator[dict[str, str]]:
    """Two nodes of the test's own: one in zone ``eu-1a``, one without a zone label."""
    core = client.CoreV1Api(api)
    made = {f"{k8s_namespace}-zoned": "eu-1a", f"{k8s_namespace}-bare": ""}
    for name, zone in made.items():
        labels = {"kubernetes.io/hostname": name} | ({"topology.kubernetes.io/zone": zone} if zone else {})
        core.create_node({"metadata": {"name": name, "labels": labels}})
    yield made
    for name in made:
        core.delete_node(name)


def bind(api: client.ApiClient, namespace: str, pod: str, node: str) -> None:
    """What the scheduler does: bind the pod to a node."""
    body = {"metadata": {"name": pod}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    # the client reads the (empty) answer as a V1Binding and fails on it; the binding is made
    client.CoreV1Api(api).create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)


def rack(api: client.ApiClient, namespace: str, pod: str) -> str | None:
    """The rack the operator wrote on a bookie pod, if any yet."""
    found = client.CoreV1Api(api).read_namespaced_pod(pod, namespace).metadata.annotations or {}
    return found.get(RACK)


def test_a_bookies_rack_is_its_nodes_zone(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any], nodes: dict[str, str]
) -> None:
    start_operator()
    create(api, k8s_namespace, "racked", SMALL)
    bookies = every_pod(api, k8s_namespace, "racked", {"bookie": 2})["bookie"]
    for pod in bookies:
        # the bookie waits for the rack, and reads it from the annotation the operator writes
        init = pod["spec"]["initContainers"]
        assert [c["name"] for c in init] == ["wait-for-rack"]
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert (
            env["MAGNETAR_BOOKIE_RACK"]["valueFrom"]["fieldRef"]["fieldPath"]
            == f"metadata.annotations['{RACK}']"
        )
        assert RACK not in (pod["metadata"].get("annotations") or {})  # not scheduled yet: no rack
    zoned, bare = nodes
    bind(api, k8s_namespace, "racked-bookie-0", zoned)
    bind(api, k8s_namespace, "racked-bookie-1", bare)

    assert wait_for("bookie-0's rack", lambda: rack(api, k8s_namespace, "racked-bookie-0")) == "/eu-1a"
    assert wait_for("bookie-1's rack", lambda: rack(api, k8s_namespace, "racked-bookie-1")) == "/default-rack"


def test_racks_given_in_the_spec_leave_the_nodes_unread(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    create(api, k8s_namespace, "listed", {**SMALL, "bookies": SMALL["bookies"] | {"racks": ["/r1", "/r2"]}})
    for pod in every_pod(api, k8s_namespace, "listed", {"bookie": 2})["bookie"]:
        assert "initContainers" not in pod["spec"]
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["MAGNETAR_RACKS"] == "/r1,/r2"
        assert "MAGNETAR_BOOKIE_RACK" not in env
