"""Admission-time validation: the CRDs' CEL rules and OpenAPI constraints refuse, at the
API server, specs that can never work — each with a 422 whose message names the problem — and let
the examples through. The operator's own checks (validation.parse_cluster, the namespace and bundle
models) are the second line, for objects stored before the rules: every case admission refuses is
refused by them too.

Server-side dry runs against the session's real kube-apiserver: nothing is stored, no operator runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from magnetar.operator import namespaces
from magnetar.operator.bundles import BundleActions
from magnetar.operator.resources import (
    BUNDLES,
    CLUSTERS,
    GROUP,
    NAMESPACES,
    VERSION,
    SpecError,
)
from magnetar.operator.validation import parse_cluster
from tests.operator.conftest import ROOT

KINDS = {CLUSTERS: "MagnetarCluster", NAMESPACES: "MagnetarNamespace", BUNDLES: "MagnetarBundle"}
NAMESPACE = {"cluster": "region-a", "tenant": "acme", "namespace": "orders"}
BUNDLE = {"cluster": "region-a", "namespace": "acme/orders", "range": "0x00000000_0x40000000"}
ZK = {"url": "zk://zk.example:2181/m"}

# (plural, spec, what the API server's message must say)
REFUSED: dict[str, tuple[str, dict[str, Any], list[str]]] = {
    "ack quorum above write quorum": (
        CLUSTERS,
        {"bookies": {"ensembleSize": 3, "writeQuorum": 2, "ackQuorum": 3}},
        ["spec.bookies.ackQuorum", "ackQuorum=3 is above writeQuorum=2"],
    ),
    "ack quorum above the default write quorum": (
        CLUSTERS,
        {"bookies": {"ackQuorum": 3}},
        ["ackQuorum=3 is above writeQuorum=2"],
    ),
    "write quorum above ensemble": (
        CLUSTERS,
        {"bookies": {"ensembleSize": 2, "writeQuorum": 3, "ackQuorum": 2}},
        ["spec.bookies.writeQuorum", "writeQuorum=3 is above ensembleSize=2"],
    ),
    "ensemble larger than the bookies": (
        CLUSTERS,
        {"bookies": {"replicas": 2, "ensembleSize": 3, "writeQuorum": 3, "ackQuorum": 2}},
        ["spec.bookies.ensembleSize", "bookies.replicas=2 cannot hold an ensemble of ensembleSize=3"],
    ),
    "even ZooKeeper count": (
        CLUSTERS,
        {"metadataStore": {"zookeeper": {"replicas": 2}}},
        ["spec.metadataStore.zookeeper.replicas", "odd number of servers", "not 2"],
    ),
    "ledger storage lots": (
        CLUSTERS,
        {"bookies": {"storage": {"ledgers": "lots"}}},
        ["spec.bookies.storage.ledgers", '"lots" is not a positive Kubernetes quantity'],
    ),
    "journal storage zero": (
        CLUSTERS,
        {"bookies": {"storage": {"journal": "0"}}},
        ["spec.bookies.storage.journal", '"0" is not a positive Kubernetes quantity'],
    ),
    "ZooKeeper storage negative": (
        CLUSTERS,
        {"metadataStore": {"zookeeper": {"storage": "-1Gi"}}},
        ["spec.metadataStore.zookeeper.storage", '"-1Gi" is not a positive Kubernetes quantity'],
    ),
    "CPU limit fast": (
        CLUSTERS,
        {"brokers": {"resources": {"limits": {"cpu": "fast"}}}},
        ["spec.brokers.resources.limits[cpu]", '"fast" is not a non-negative Kubernetes quantity'],
    ),
    "memory request negative": (
        CLUSTERS,
        {"bookies": {"resources": {"requests": {"memory": "-512Mi"}}}},
        ["spec.bookies.resources.requests[memory]", '"-512Mi" is not a non-negative Kubernetes quantity'],
    ),
    "request above limit": (
        CLUSTERS,
        {
            "metadataStore": {
                "zookeeper": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "500m"}}}
            }
        },
        ["spec.metadataStore.zookeeper.resources", "requests value is above its resources.limits"],
    ),
    "metadata URL without a host": (
        CLUSTERS,
        {"metadataStore": {"url": "zk://"}},
        ["spec.metadataStore.url", '"zk://" is not a ZooKeeper URL', "zk://host:port"],
    ),
    "metadata URL in Pulsar's zk:host form": (
        CLUSTERS,
        {"metadataStore": {"url": "zk:zk-1:2181"}},
        ["spec.metadataStore.url", '"zk:zk-1:2181" is not a ZooKeeper URL'],
    ),
    "metadata URL of a one-process store": (
        CLUSTERS,
        {"metadataStore": {"url": "memory://shared"}},
        ["spec.metadataStore.url", "is not a ZooKeeper URL"],
    ),
    "configuration store URL of a file": (
        CLUSTERS,
        {"metadataStore": ZK, "configurationStore": {"url": "sqlite:///var/lib/m.db"}},
        ["spec.configurationStore.url", "is not a ZooKeeper URL"],
    ),
    "a user's certificates and a CA to issue from": (
        CLUSTERS,
        {"tls": {"secretName": "mine", "caSecretName": "region-a-ca"}},
        ["spec.tls.caSecretName", "tls.secretName and tls.caSecretName exclude each other"],
    ),
    "a signing key named with two namespaces": (
        CLUSTERS,
        {"auth": {"signingKeySecretName": "jp-east/jp-east/jp-east-token-key"}},
        ["spec.auth.signingKeySecretName", "should match"],
    ),
    "a CA in a namespace no namespace can be called": (
        CLUSTERS,
        {"tls": {"caSecretName": "JP.East/jp-east-ca"}},
        ["spec.tls.caSecretName", "should match"],
    ),
    "anti-affinity by no topology": (
        CLUSTERS,
        {
            "bookies": {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"app": "x"}}}
                        ]
                    }
                }
            }
        },
        [
            "spec.bookies.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
            "Required value",
        ],
    ),
    "preferred affinity weighing over 100": (
        CLUSTERS,
        {
            "brokers": {
                "affinity": {
                    "podAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 200, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
                        ]
                    }
                }
            }
        },
        [
            "spec.brokers.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
            "less than or equal to 100",
        ],
    ),
    "spread when unsatisfiable sometimes": (
        CLUSTERS,
        {
            "brokers": {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "Sometimes",
                    }
                ]
            }
        },
        ["spec.brokers.topologySpreadConstraints[0].whenUnsatisfiable", 'Unsupported value: "Sometimes"'],
    ),
    "spread with no skew allowed": (
        CLUSTERS,
        {
            "metadataStore": {
                "zookeeper": {
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 0,
                            "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "DoNotSchedule",
                        }
                    ]
                }
            }
        },
        ["spec.metadataStore.zookeeper.topologySpreadConstraints[0].maxSkew", "greater than or equal to 1"],
    ),
    "spread over no topology": (
        CLUSTERS,
        {"bookies": {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]}},
        ["spec.bookies.topologySpreadConstraints[0].topologyKey", "Required value"],
    ),
    "autoscaling with max below min": (
        CLUSTERS,
        {"brokers": {"autoscaling": {"min": 3, "max": 2, "target": {"type": "LoadManager"}}}},
        ["spec.brokers.autoscaling.max", "autoscaling.max=2 is below autoscaling.min=3"],
    ),
    "autoscaling down to no broker": (
        CLUSTERS,
        {"brokers": {"autoscaling": {"min": 0, "max": 2, "target": {"type": "LoadManager"}}}},
        ["spec.brokers.autoscaling.min", "greater than or equal to 1"],
    ),
    "autoscaling on an unknown target": (
        CLUSTERS,
        {"brokers": {"autoscaling": {"min": 1, "max": 2, "target": {"type": "Memory"}}}},
        ["spec.brokers.autoscaling.target.type", 'Unsupported value: "Memory"', '"CPU", "LoadManager"'],
    ),
    "autoscaling on CPU without a CPU request": (
        CLUSTERS,
        {"brokers": {"autoscaling": {"min": 1, "max": 2, "target": {"type": "CPU"}}}},
        ["spec.brokers.autoscaling.target.type", "CPU needs brokers.resources.requests.cpu"],
    ),
    "namespace of a cluster no object can be called": (
        NAMESPACES,
        {**NAMESPACE, "cluster": "Region_A"},
        ["spec.cluster", "should match"],
    ),
    "bundle of a cluster no object can be called": (
        BUNDLES,
        {**BUNDLE, "cluster": "Region_A"},
        ["spec.cluster", "should match"],
    ),
    "empty bundle range": (
        BUNDLES,
        {**BUNDLE, "range": "0x40000000_0x00000000"},
        ["spec.range", "bundle range 0x40000000_0x00000000 is empty"],
    ),
    "transfer without a destination": (
        BUNDLES,
        {**BUNDLE, "action": {"type": "Transfer"}},
        ["spec.action.destinationBroker", "a Transfer needs spec.action.destinationBroker"],
    ),
}

# Near misses the rules must let through (the operator accepts them too).
ACCEPTED: dict[str, tuple[str, dict[str, Any]]] = {
    "no spec fields at all": (CLUSTERS, {}),
    "equal quorums": (
        CLUSTERS,
        {"bookies": {"replicas": 3, "ensembleSize": 3, "writeQuorum": 3, "ackQuorum": 3}},
    ),
    "no bookies yet": (CLUSTERS, {"bookies": {"replicas": 0, "ensembleSize": 3, "writeQuorum": 2}}),
    "an external cluster's bookies are not checked": (
        CLUSTERS,
        {"external": {"adminUrl": "http://pulsar:8080"}, "bookies": {"ackQuorum": 3}},
    ),
    "three ZooKeeper servers": (
        CLUSTERS,
        {"metadataStore": {"zookeeper": {"replicas": 3, "storage": "500Mi"}}},
    ),
    "a ZooKeeper ensemble URL": (
        CLUSTERS,
        {
            "metadataStore": {"url": "zk://zk-0.zk:2181,zk-1.zk:2181,zk-2.zk:2181/magnetar/a"},
            "configurationStore": {"url": "zk://global-zk"},
        },
    ),
    "resources within limits": (
        CLUSTERS,
        {
            "brokers": {
                "resources": {
                    "requests": {"cpu": "500m", "memory": "1Gi"},
                    "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "2G"},
                }
            }
        },
    ),
    "autoscaling on CPU against a request": (
        CLUSTERS,
        {
            "brokers": {
                "resources": {"requests": {"cpu": "500m"}},
                "autoscaling": {"min": 2, "max": 5, "target": {"type": "CPU", "averageUtilization": 70}},
            }
        },
    ),
    "autoscaling on load reports, min and max alike": (
        CLUSTERS,
        {
            "brokers": {
                "autoscaling": {
                    "min": 2,
                    "max": 2,
                    "target": {"type": "LoadManager"},
                    "scaleDownStabilizationSeconds": 0,
                }
            }
        },
    ),
    "a second region sharing the first's key, CA and configuration store": (
        CLUSTERS,
        {
            "auth": {"signingKeySecretName": "region-a-token-key"},
            "tls": {"caSecretName": "region-a-ca"},
            "configurationStore": {"url": "zk://region-a-zookeeper.default.svc:2181/region-a"},
        },
    ),
    "a second region in another Kubernetes namespace": (
        CLUSTERS,
        {
            "auth": {"signingKeySecretName": "region-a/region-a-token-key"},
            "tls": {"caSecretName": "region-a/region-a-ca"},
            "configurationStore": {"url": "zk://region-a-zookeeper.region-a.svc:2181/region-a"},
        },
    ),
    "placement of every component given": (
        CLUSTERS,
        {
            "metadataStore": {"zookeeper": {"replicas": 3, "topologySpreadConstraints": []}},
            "bookies": {
                "rackNodeLabel": "topology.kubernetes.io/rack",
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                            ]
                        }
                    },
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "bookie"}},
                            }
                        ]
                    },
                },
            },
            "brokers": {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 2,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "minDomains": 2,
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "broker"}},
                    }
                ]
            },
        },
    ),
    "a namespace": (NAMESPACES, NAMESPACE),
    "the last bundle": (BUNDLES, {**BUNDLE, "range": "0xC0000000_0xffffffff", "action": {"type": "Split"}}),
    "a transfer": (BUNDLES, {**BUNDLE, "action": {"type": "Transfer", "destinationBroker": "b-1:8080"}}),
}


@pytest.fixture(scope="module")
def namespace(api: client.ApiClient) -> Iterator[str]:
    name = "admission"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    yield name
    client.CoreV1Api(api).delete_namespace(name)


def dry_run_create(api: client.ApiClient, namespace: str, plural: str, spec: dict[str, Any]) -> Any:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KINDS[plural],
        "metadata": {"name": "x"},
        "spec": spec,
    }
    return client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, plural, body, dry_run="All"
    )


@pytest.mark.parametrize("case", REFUSED)
def test_the_api_server_refuses_a_spec_that_can_never_work(
    api: client.ApiClient, namespace: str, case: str
) -> None:
    plural, spec, says = REFUSED[case]
    with pytest.raises(client.exceptions.ApiException) as refused:
        dry_run_create(api, namespace, plural, spec)
    assert refused.value.status == 422, refused.value.body
    message = json.loads(refused.value.body)["message"]
    for part in says:
        assert part in message, message


@pytest.mark.parametrize("case", ACCEPTED)
def test_the_api_server_accepts_a_near_miss(api: client.ApiClient, namespace: str, case: str) -> None:
    plural, spec = ACCEPTED[case]
    assert dry_run_create(api, namespace, plural, spec)["kind"] == KINDS[plural]


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "k8s").glob("*.yaml")), ids=lambda p: p.name)
def test_the_api_server_accepts_the_examples(api: client.ApiClient, namespace: str, path: Any) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        plural = next(p for p, kind in KINDS.items() if kind == doc["kind"])
        assert operator_refusal(plural, doc["spec"]) is None
        assert dry_run_create(api, namespace, plural, doc["spec"])["metadata"]["name"] == "x"


class _Checked(Exception):
    """The bundle handler got past its checks to looking up the cluster."""


class _NoKube:
    async def get_custom(self, *args: Any) -> None:
        raise _Checked


def operator_refusal(plural: str, spec: dict[str, Any]) -> str | None:
    """What the operator says of ``spec`` (None: it would carry it out): the checks its handlers
    make before they act, for an object the API server stored without the CRDs' rules."""
    body = {"metadata": {"generation": 1}, "spec": spec}
    try:
        if plural == CLUSTERS:
            parse_cluster(spec, "x")
        elif plural == NAMESPACES:
            namespaces.parse(body)
        else:
            # The bundle handler checks the spec, then a Transfer's destination, then looks the
            # cluster up: a stand-in Kubernetes client stops it there.
            asyncio.run(BundleActions(_NoKube()).act(body, "default"))  # type: ignore[arg-type]
    except SpecError as exc:
        return str(exc)
    except _Checked:
        return None
    return None


@pytest.mark.parametrize("case", REFUSED)
def test_what_admission_refuses_the_operator_refuses_too(case: str) -> None:
    """The two lines agree: an object stored before the rules (or applied without them) is a
    Degraded condition naming the same problem, never a crash-looping pod."""
    plural, spec, _ = REFUSED[case]
    assert operator_refusal(plural, spec) is not None


@pytest.mark.parametrize("case", ACCEPTED)
def test_what_admission_accepts_the_operator_accepts_too(case: str) -> None:
    plural, spec = ACCEPTED[case]
    assert operator_refusal(plural, spec) is None
