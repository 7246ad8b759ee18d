"""The chart's RBAC is enough: the operator, authenticated as the chart's ServiceAccount (a token
from the API server's TokenRequest), reconciles a cluster, restarts its pods and posts Events."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from magnetar.kube.control_plane import BIN, ControlPlane
from tests.operator.conftest import ROOT, condition, get_cr, wait_for, wait_for_event
from tests.operator.test_placement import bind, rack


def test_the_operator_works_with_the_charts_service_account_only(
    control_plane: ControlPlane, api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    if not (BIN / "helm").is_file():
        pytest.skip("helm not built: run `make k8s-testenv`")
    release_ns = f"{k8s_namespace}-op"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": release_ns}})
    rendered = subprocess.run(
        [str(BIN / "helm"), "template", "mg", str(ROOT / "charts" / "magnetar"), "--namespace", release_ns],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    applied = control_plane.kubectl("apply", "-n", release_ns, "-f", "-", stdin=rendered)
    assert applied.returncode == 0, applied.stderr
    token = control_plane.kubectl("create", "token", "mg-magnetar", "-n", release_ns)
    assert token.returncode == 0, token.stderr

    cfg = client.Configuration()
    cfg.host = api.configuration.host
    cfg.ssl_ca_cert = api.configuration.ssl_ca_cert
    cfg.api_key = {"authorization": f"Bearer {token.stdout.strip()}"}
    restricted = client.ApiClient(cfg)
    # The token really is restricted: it may make and read Secrets by name, never list them.
    with pytest.raises(client.exceptions.ApiException) as denied:
        client.CoreV1Api(restricted).list_namespaced_secret(k8s_namespace)
    assert denied.value.status == 403

    start_operator(api=restricted)
    body = {
        "apiVersion": "magnetar.dev/v1alpha1",
        "kind": "MagnetarCluster",
        "metadata": {"name": "rbac"},
        "spec": {"bookies": {"replicas": 2}, "brokers": {"replicas": 1}},
    }
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        "magnetar.dev", "v1alpha1", k8s_namespace, "magnetarclusters", body
    )

    def converged(generation: int) -> bool:
        ready = condition(get_cr(api, "magnetarclusters", k8s_namespace, "rbac"))
        return ready.get("status") == "True" and ready.get("observedGeneration") == generation

    wait_for("rbac Ready", lambda: converged(1))
    custom.patch_namespaced_custom_object(
        "magnetar.dev", "v1alpha1", k8s_namespace, "magnetarclusters", "rbac",
        {"spec": {"bookies": {"config": {"journal_max_group_wait_msec": 3}}}},
    )  # fmt: skip
    wait_for("rbac restarted and Ready", lambda: converged(2), timeout_s=120)
    # A bookie bound to a node gets its rack under the chart's rules too (get nodes, patch pods);
    # last, as a pod bound to a node no kubelet runs is never deleted, so never restarted.
    node = f"{k8s_namespace}-node"
    core = client.CoreV1Api(api)
    core.create_node({"metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": "z1"}}})
    try:
        bind(api, k8s_namespace, "rbac-bookie-0", node)
        wait_for("bookie-0's rack", lambda: rack(api, k8s_namespace, "rbac-bookie-0") == "/z1")
    finally:
        core.delete_node(node)
    for reason in ("Applied", "RestartingPod", "Converged"):
        wait_for_event(api, k8s_namespace, "rbac", "Normal", reason)
    # The cluster's Secrets were made under the chart's rules.
    made = {s.metadata.name for s in client.CoreV1Api(api).list_namespaced_secret(k8s_namespace).items}
    assert {"rbac-token-key", "rbac-superuser-token", "rbac-ca", "rbac-broker-tls"} <= made
