"""MagnetarCluster against a real API server: what `kubectl apply` of the examples creates, what
the API server rejects, how semantic errors show, and conditions as a user reads them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from kubernetes import client

from magnetar.bookie.config import BookieConfig
from magnetar.broker.config import BrokerConfig
from magnetar.kube.control_plane import ControlPlane
from magnetar.operator.configs import reserved
from magnetar.operator.resources import ClusterSpec
from tests.operator.conftest import ROOT, condition, get_cr, wait_for, wait_for_event

EXAMPLES = ROOT / "examples" / "k8s"


def ready(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    obj = get_cr(api, "magnetarclusters", namespace, name)
    return obj if condition(obj).get("status") == "True" else None


def owned_by(obj: Any, owner: dict[str, Any]) -> bool:
    refs = obj.metadata.owner_references or []
    return any(r.uid == owner["metadata"]["uid"] and r.kind == "MagnetarCluster" for r in refs)


def test_kubectl_apply_of_the_examples_creates_owned_objects(
    control_plane: ControlPlane, api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    applied = control_plane.kubectl("apply", "-n", k8s_namespace, "-f", str(EXAMPLES))
    assert applied.returncode == 0, applied.stderr

    cluster = wait_for("region-a Ready", lambda: ready(api, k8s_namespace, "region-a"))
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    policy = client.PolicyV1Api(api)
    sets = {s.metadata.name: s for s in apps.list_namespaced_stateful_set(k8s_namespace).items}
    assert {n: s.spec.replicas for n, s in sets.items()} == {
        "region-a-zookeeper": 1,
        "region-a-bookie": 3,
        "region-a-broker": 2,
        "region-a-broker-readonly": 1,
    }
    assert all(owned_by(s, cluster) for s in sets.values())
    bookie = sets["region-a-bookie"]
    assert [c.metadata.name for c in bookie.spec.volume_claim_templates] == ["journal", "ledgers"]
    assert bookie.spec.update_strategy.type == "OnDelete"  # the operator rolls bookies itself

    services = {s.metadata.name: s for s in core.list_namespaced_service(k8s_namespace).items}
    assert services["region-a-bookie"].spec.cluster_ip == "None"  # headless: stable bookie ids
    # TLS is on by default: pulsar+ssl and https beside the plain ports (authenticated too)
    assert {p.port for p in services["region-a-broker"].spec.ports} == {6650, 8080, 6651, 8443}
    assert all(owned_by(s, cluster) for s in services.values())
    pdbs = policy.list_namespaced_pod_disruption_budget(k8s_namespace).items
    assert {p.metadata.name: p.spec.max_unavailable for p in pdbs}["region-a-bookie"] == 1

    maps = {m.metadata.name: m for m in core.list_namespaced_config_map(k8s_namespace).items}
    # The settings naming the mounted Secrets' files are checked against real files in
    # test_security; the files exist only in the pods.
    mounted = reserved(ClusterSpec())
    bookie_yaml = yaml.safe_load(maps["region-a-bookie"].data["bookie.yaml"])
    broker_yaml = yaml.safe_load(maps["region-a-broker"].data["broker.yaml"])
    assert mounted["bookies"] <= set(bookie_yaml)
    assert mounted["brokers"] <= set(broker_yaml)
    bookie_conf = BookieConfig.model_validate(
        {k: v for k, v in bookie_yaml.items() if k not in mounted["bookies"]}
    )
    broker_conf = BrokerConfig.model_validate(
        {k: v for k, v in broker_yaml.items() if k not in mounted["brokers"]}
    )
    zk = f"zk://region-a-zookeeper.{k8s_namespace}.svc:2181/magnetar/region-a"
    assert bookie_conf.metadata_service_uri == zk
    assert broker_conf.metadata_store_url == zk
    assert broker_conf.cluster_name == "region-a"
    assert not broker_conf.read_only_broker
    # PIP-63's pool: the read-only brokers' settings say so (they had been writable brokers)
    read_only_yaml = yaml.safe_load(maps["region-a-broker-readonly"].data["broker.yaml"])
    assert read_only_yaml["read_only_broker"] is True
    assert {k: v for k, v in read_only_yaml.items() if k != "read_only_broker"} == broker_yaml
    assert cluster["status"]["serviceUrl"] == f"pulsar://region-a-broker.{k8s_namespace}.svc:6650"

    # The external cluster deploys nothing and says it cannot reach its admin REST.
    legacy = wait_for(
        "legacy reported unreachable",
        lambda: (
            condition(get_cr(api, "magnetarclusters", k8s_namespace, "legacy"), "Degraded").get("reason")
            == "Unreachable"
        ),
    )
    assert legacy
    assert not [s for s in sets if s.startswith("legacy")]
    # The namespace cannot reach region-a's brokers (no kubelet runs them): a condition, no crash.
    ns_cond = wait_for(
        "acme-orders condition",
        lambda: condition(get_cr(api, "magnetarnamespaces", k8s_namespace, "acme-orders"), "Degraded"),
    )
    assert ns_cond["status"] == "True"
    assert ns_cond["reason"] in {"Unreachable", "AdminError"}


def test_the_api_server_rejects_a_schema_violation_naming_the_field(
    control_plane: ControlPlane, k8s_namespace: str
) -> None:
    bad = {
        "apiVersion": "magnetar.dev/v1alpha1",
        "kind": "MagnetarCluster",
        "metadata": {"name": "bad"},
        "spec": {"bookies": {"replicas": "three"}},
    }
    result = control_plane.kubectl("apply", "-n", k8s_namespace, "-f", "-", stdin=yaml.safe_dump(bad))
    assert result.returncode != 0
    assert "spec.bookies.replicas" in result.stderr

    bad_range = {
        "apiVersion": "magnetar.dev/v1alpha1",
        "kind": "MagnetarBundle",
        "metadata": {"name": "bad-range"},
        "spec": {
            "cluster": "c",
            "namespace": "t/n",
            "range": "0x0_0xffffffff",
            "action": {"type": "Explode"},
        },
    }
    result = control_plane.kubectl("apply", "-n", k8s_namespace, "-f", "-", stdin=yaml.safe_dump(bad_range))
    assert result.returncode != 0
    assert "spec.range" in result.stderr
    assert "spec.action.type" in result.stderr


def test_a_spec_only_the_operator_refuses_is_a_condition_and_an_event_then_fixing_it_converges(
    control_plane: ControlPlane, api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    """A broken quorum, storage "lots" or a CPU limit "fast" are refused at admission now
    (test_admission.py, which also checks the operator refuses them for objects stored before the
    rules). A setting the bookies do not know passes admission (bookies.config is free-form): the
    operator refuses it before creating anything, on the resource, and a fixed spec converges."""
    op = start_operator()
    body = {
        "apiVersion": "magnetar.dev/v1alpha1",
        "kind": "MagnetarCluster",
        "metadata": {"name": "typo"},
        "spec": {
            "metadataStore": {"url": "zk://zk.example:2181/q"},
            "bookies": {"replicas": 3, "config": {"journal_max_group_wait_ms": 5}},
            "brokers": {"replicas": 1},
        },
    }
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        "magnetar.dev", "v1alpha1", k8s_namespace, "magnetarclusters", body
    )
    degraded = wait_for(
        "Degraded InvalidConfig",
        lambda: (
            (c := condition(get_cr(api, "magnetarclusters", k8s_namespace, "typo"), "Degraded"))
            and c["reason"] == "InvalidConfig"
            and c
        ),
    )
    assert degraded["status"] == "True"
    assert "journal_max_group_wait_ms" in degraded["message"]
    obj = get_cr(api, "magnetarclusters", k8s_namespace, "typo")
    assert obj is not None
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    assert condition(obj, "Ready")["status"] == "False"
    wait_for_event(api, k8s_namespace, "typo", "Warning", "InvalidConfig")
    assert not client.AppsV1Api(api).list_namespaced_stateful_set(k8s_namespace).items
    assert op.error is None  # the operator is still running, not crash-looping

    custom.patch_namespaced_custom_object(
        "magnetar.dev", "v1alpha1", k8s_namespace, "magnetarclusters", "typo",
        {"spec": {"bookies": {"config": {"journal_max_group_wait_ms": None}}}},
    )  # fmt: skip
    fixed = wait_for("typo Ready", lambda: ready(api, k8s_namespace, "typo"))
    assert fixed["status"]["observedGeneration"] == fixed["metadata"]["generation"] == 2
    assert condition(fixed, "Degraded")["status"] == "False"


def test_an_object_the_api_server_refuses_is_a_condition_and_an_event_not_a_retry_loop(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    """A quota lets one StatefulSet in: the API server refuses the next one (a real refusal, at
    admission), and the resource says which object and why."""
    core = client.CoreV1Api(api)
    hard = {"count/statefulsets.apps": "1"}
    core.create_namespaced_resource_quota(
        k8s_namespace, {"metadata": {"name": "one-set"}, "spec": {"hard": hard}}
    )
    # What the quota controller would write (no controller-manager runs here): admission reads it.
    core.patch_namespaced_resource_quota_status(
        "one-set", k8s_namespace, {"status": {"hard": hard, "used": {"count/statefulsets.apps": "0"}}}
    )
    op = start_operator()
    body = {
        "apiVersion": "magnetar.dev/v1alpha1",
        "kind": "MagnetarCluster",
        "metadata": {"name": "quota"},
        "spec": {"metadataStore": {"url": "zk://zk.example:2181/q"}, "brokers": {"replicas": 1}},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "magnetar.dev", "v1alpha1", k8s_namespace, "magnetarclusters", body
    )
    degraded = wait_for(
        "Degraded Refused",
        lambda: (
            (c := condition(get_cr(api, "magnetarclusters", k8s_namespace, "quota"), "Degraded"))
            and c["reason"] == "Refused"
            and c
        ),
    )
    assert "the API server refused StatefulSet quota-" in degraded["message"]
    assert "HTTP 403" in degraded["message"]
    wait_for_event(api, k8s_namespace, "quota", "Warning", "Refused")
    assert op.error is None


def test_every_pod_is_probed_often_enough_to_be_ready_soon_and_tolerates_as_many_failures() -> None:
    """A pod that starts serving is ready within 2 s (the kubelet's next probe; the operator's next
    step waits on it), and a ready one is taken out of its Services only after 16 s of failed
    probes, no sooner than the 3 failures 5 s apart Kubernetes' defaults allowed."""
    from magnetar.operator.manifests import render_cluster
    from magnetar.operator.validation import parse_cluster

    spec = parse_cluster({"brokers": {"readOnlyReplicas": 1}}, "c")
    probes = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
        for o in render_cluster(spec, "c", "ns")
        if o["kind"] == "StatefulSet"
    }
    assert set(probes) == {"c-zookeeper", "c-bookie", "c-broker", "c-broker-readonly"}
    for name, probe in probes.items():
        assert probe["periodSeconds"] <= 2, name
        assert probe["periodSeconds"] * probe["failureThreshold"] >= 15, name
