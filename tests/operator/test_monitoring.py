"""PodMonitors: the operator makes one per component that serves /metrics where the Prometheus
Operator's CRDs are installed, and nothing where they are not; the chart does the same for the
operator itself and ships the Grafana dashboards. Against the real API server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from magnetar.kube.control_plane import ControlPlane
from magnetar.operator.manifests import COMPONENT, INSTANCE
from tests.operator.conftest import condition, events, get_cr, wait_for, wait_for_event
from tests.operator.test_chart import CHART, helm

CRD = "podmonitors.monitoring.coreos.com"
#: Prometheus' duration
DURATION = "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
#: a stand-in for the Prometheus Operator's PodMonitor CRD (its group, kind and names, and the
#: fields the operator sets, typed as there), so the test needs no download
POD_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {"kind": "PodMonitor", "listKind": "PodMonitorList", "plural": "podmonitors",
                  "singular": "podmonitor", "categories": ["prometheus-operator"], "shortNames": ["pmon"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "required": ["spec"],
                "properties": {"spec": {
                    "type": "object",
                    "required": ["selector"],
                    "properties": {
                        "selector": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        "podMetricsEndpoints": {"type": "array", "items": {
                            "type": "object",
                            "properties": {"port": {"type": "string"}, "path": {"type": "string"},
                                           "interval": {"type": "string", "pattern": DURATION}},
                        }},
                    },
                }},
            }},
        }],
    },
}  # fmt: skip
SPEC = {
    "bookies": {"replicas": 1, "ensembleSize": 1, "writeQuorum": 1, "ackQuorum": 1},
    "brokers": {"replicas": 1, "readOnlyReplicas": 1},
}


def crd_installed(api: client.ApiClient) -> bool:
    try:
        client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD)
    except client.exceptions.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


@pytest.fixture
def pod_monitor_crd(api: client.ApiClient, control_plane: ControlPlane) -> Iterator[None]:
    """The PodMonitor CRD, installed for one test and removed after it."""
    extensions = client.ApiextensionsV1Api(api)
    extensions.create_custom_resource_definition(POD_MONITOR_CRD)
    established = control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD}")
    assert established.returncode == 0, established.stderr
    yield
    extensions.delete_custom_resource_definition(CRD)
    wait_for("the PodMonitor CRD removed", lambda: not crd_installed(api))


def create(api: client.ApiClient, namespace: str, name: str) -> None:
    body = {"apiVersion": "magnetar.dev/v1alpha1", "kind": "MagnetarCluster", "metadata": {"name": name}}
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "magnetar.dev", "v1alpha1", namespace, "magnetarclusters", body | {"spec": SPEC}
    )


def ready(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    obj = get_cr(api, "magnetarclusters", namespace, name)
    return obj if condition(obj).get("status") == "True" else None


def test_with_the_prometheus_operators_crds_each_component_gets_a_pod_monitor(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any], pod_monitor_crd: None
) -> None:
    start_operator()
    create(api, k8s_namespace, "watched")
    cluster = wait_for("watched Ready", lambda: ready(api, k8s_namespace, "watched"))
    found = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "monitoring.coreos.com", "v1", k8s_namespace, "podmonitors"
    )["items"]
    monitors = {m["metadata"]["name"]: m for m in found}
    # ZooKeeper's official image serves no Prometheus endpoint unless configured to: none for it
    assert sorted(monitors) == ["watched-bookie", "watched-broker", "watched-broker-readonly"]
    core = client.CoreV1Api(api)
    for name, monitor in monitors.items():
        assert monitor["metadata"]["ownerReferences"][0]["uid"] == cluster["metadata"]["uid"]
        selector = monitor["spec"]["selector"]["matchLabels"]
        component = selector[COMPONENT]
        assert selector[INSTANCE] == "watched"
        assert name == f"watched-{component}"
        # it selects the component's pods, by a port their container names
        pods = core.list_namespaced_pod(
            k8s_namespace, label_selector=",".join(f"{k}={v}" for k, v in selector.items())
        )
        assert pods.items, name
        endpoint = monitor["spec"]["podMetricsEndpoints"][0]
        assert endpoint["path"] == "/metrics"
        for pod in pods.items:
            assert endpoint["port"] in {p.name for p in pod.spec.containers[0].ports}, name


def test_without_them_the_operator_makes_none_and_reports_nothing(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    assert not crd_installed(api), "a test left the PodMonitor CRD installed"
    start_operator()
    create(api, k8s_namespace, "unwatched")
    cluster = wait_for("unwatched Ready", lambda: ready(api, k8s_namespace, "unwatched"))
    assert condition(cluster, "Degraded")["status"] == "False"
    wait_for_event(api, k8s_namespace, "unwatched", "Normal", "Applied")
    applied = [m for _, reason, m in events(api, k8s_namespace, "unwatched") if reason == "Applied"]
    assert applied
    assert all("PodMonitor" not in m for m in applied), applied
    assert all(t == "Normal" for t, _, _ in events(api, k8s_namespace, "unwatched"))


def rendered(*args: str) -> list[dict[str, Any]]:
    """``helm template`` of the chart with ``args`` (``--set=...``, ``--api-versions=...``)."""
    result = helm("template", "mg", str(CHART), "--namespace", "magnetar", *args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def test_the_chart_makes_the_operators_pod_monitor_only_where_the_crds_exist() -> None:
    def monitors(*args: str) -> list[dict[str, Any]]:
        return [o for o in rendered(*args) if o["kind"] == "PodMonitor"]

    assert monitors() == []  # helm template knows no monitoring.coreos.com API: none
    with_crds = monitors("--api-versions=monitoring.coreos.com/v1/PodMonitor")
    assert [m["metadata"]["name"] for m in with_crds] == ["mg-magnetar"]
    assert with_crds[0]["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    assert (
        monitors("--api-versions=monitoring.coreos.com/v1/PodMonitor", "--set=monitoring.podMonitors=false")
        == []
    )
    deployment = next(o for o in rendered("--set=monitoring.podMonitors=false") if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert "--no-pod-monitors" in container["args"]
    assert "--metrics-port=9090" in container["args"]
    assert {"name": "metrics", "containerPort": 9090} in container["ports"]


def test_the_chart_ships_every_dashboard_in_a_configmap_grafanas_sidecar_loads() -> None:
    maps = [
        o
        for o in rendered()
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "mg-magnetar-dashboards"
    ]
    assert len(maps) == 1
    assert maps[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = maps[0]["data"]
    assert sorted(shipped) == sorted(p.name for p in (CHART / "dashboards").glob("*.json"))
    assert {"broker.json", "bookie.json", "replication.json", "operator.json"} <= set(shipped)
    for name, text in shipped.items():
        assert json.loads(text)["panels"], name  # the file itself, whole
    assert not [
        o
        for o in rendered("--set=monitoring.dashboards.enabled=false")
        if "dashboards" in o["metadata"]["name"]
    ]
