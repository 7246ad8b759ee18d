"""Brokers scaled by load (spec.brokers.autoscaling), against the real API server and the mock
kubelet: a CPU target becomes an HPA with the spec's bounds and target; a LoadManager target has the
operator read each broker's load report from its admin REST (here a small HTTP server standing in
for the brokers' admin, answering per pod) and scale the StatefulSet between min and max, bundles
moved onto a new broker once it is ready and off a leaving one before the replicas drop."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client

from magnetar.operator.autoscaling import LOAD_REPORT, AdminLoadReader
from magnetar.operator.gates import ClusterRef
from magnetar.operator.resources import SpecError
from magnetar.operator.validation import parse_cluster
from tests.operator.conftest import get_cr, wait_for, wait_for_event
from tests.operator.mock_kubelet import Timeline

CUSTOM = ("magnetar.dev", "v1alpha1")
ZK = {"url": "zk://zk.example:2181/scale"}


class BrokerAdmins:
    """Every broker pod's admin REST in one HTTP server: ``/<pod>/admin/v2/...``. Each answers the
    load report of ``load`` (percent per resource, as a broker's load manager publishes it)."""

    def __init__(self) -> None:
        self.load: dict[str, float] = {"cpu": 0.0}
        self.asked: list[str] = []
        #: when each load report was answered (time.monotonic()), and the load it gave
        self.answered: list[tuple[float, dict[str, float]]] = []
        admins = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                pod, _, path = self.path.lstrip("/").partition("/")
                admins.asked.append(pod)
                if f"/{path}" != LOAD_REPORT:
                    self.send_error(404)
                    return
                load = dict(admins.load)
                body = json.dumps({"broker_id": pod, "memory": 1.0, **load}).encode()
                admins.answered.append((time.monotonic(), load))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url_of(self, cluster: ClusterRef, pod: dict[str, Any]) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{pod['metadata']['name']}"

    def __enter__(self) -> BrokerAdmins:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def admins() -> Iterator[BrokerAdmins]:
    with BrokerAdmins() as made:
        yield made


class TimedDrainer:
    """Records each drain on the timeline, and when it was."""

    def __init__(self, timeline: Timeline, namespace: str) -> None:
        self.timeline = timeline
        self.namespace = namespace
        self.at: dict[str, float] = {}

    async def drain(self, cluster: ClusterRef, pod: dict[str, Any]) -> list[str]:
        self.at[pod["metadata"]["name"]] = time.monotonic()
        self.timeline.add("drain", f"{self.namespace}/{pod['metadata']['name']}")
        return ["public/default/0x00000000_0x80000000"]


class RecordingSpreader:
    def __init__(self, timeline: Timeline, namespace: str) -> None:
        self.timeline = timeline
        self.namespace = namespace

    async def spread(
        self, cluster: ClusterRef, members: list[dict[str, Any]], joining: list[dict[str, Any]]
    ) -> list[str]:
        for pod in joining:
            self.timeline.add("spread", f"{self.namespace}/{pod['metadata']['name']}", len(members))
        return ["public/default/0x80000000_0xffffffff"]


def create(api: client.ApiClient, namespace: str, name: str, brokers: dict[str, Any]) -> None:
    body = {
        "apiVersion": "magnetar.dev/v1alpha1",
        "kind": "MagnetarCluster",
        "metadata": {"name": name},
        "spec": {"metadataStore": ZK, "bookies": {"replicas": 2}, "brokers": brokers},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(*CUSTOM, namespace, "magnetarclusters", body)


def patch_brokers(api: client.ApiClient, namespace: str, name: str, brokers: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        *CUSTOM, namespace, "magnetarclusters", name, {"spec": {"brokers": brokers}}
    )


def replicas(api: client.ApiClient, namespace: str, name: str) -> int | None:
    try:
        sts = client.AppsV1Api(api).read_namespaced_stateful_set(f"{name}-broker", namespace)
    except client.exceptions.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return int(sts.spec.replicas)


def hpa(api: client.ApiClient, namespace: str, name: str) -> Any:
    try:
        return client.AutoscalingV2Api(api).read_namespaced_horizontal_pod_autoscaler(
            f"{name}-broker", namespace
        )
    except client.exceptions.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def autoscaling(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        ((get_cr(api, "magnetarclusters", namespace, name) or {}).get("status") or {}).get("autoscaling")
        or {}
    )


def ready_brokers(api: client.ApiClient, namespace: str, name: str) -> list[str]:
    pods = client.CoreV1Api(api).list_namespaced_pod(
        namespace, label_selector=f"app.kubernetes.io/instance={name},app.kubernetes.io/component=broker"
    )
    return sorted(
        p.metadata.name
        for p in pods.items
        if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    )


def test_a_cpu_target_makes_an_hpa_with_the_specs_bounds_and_target_and_another_target_deletes_it(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    start_operator(autoscale_interval_s=0.5)
    scaling = {"min": 2, "max": 5, "target": {"type": "CPU", "averageUtilization": 70},
               "scaleDownStabilizationSeconds": 60}  # fmt: skip
    create(api, k8s_namespace, "cpu", {"resources": {"requests": {"cpu": "500m"}}, "autoscaling": scaling})
    made = wait_for("the brokers' HPA", lambda: hpa(api, k8s_namespace, "cpu"))
    assert made.spec.scale_target_ref.kind == "StatefulSet"
    assert made.spec.scale_target_ref.name == "cpu-broker"
    assert (made.spec.min_replicas, made.spec.max_replicas) == (2, 5)
    [metric] = made.spec.metrics
    assert metric.resource.name == "cpu"
    assert (metric.resource.target.type, metric.resource.target.average_utilization) == ("Utilization", 70)
    assert made.spec.behavior.scale_down.stabilization_window_seconds == 60
    assert made.metadata.owner_references[0].name == "cpu", "the cluster owns it (deleted with it)"
    wait_for("the brokers' StatefulSet at min", lambda: replicas(api, k8s_namespace, "cpu") == 2)
    wait_for(
        "status.autoscaling mirroring the HPA",
        lambda: (
            "HorizontalPodAutoscaler cpu-broker"
            in str(autoscaling(api, k8s_namespace, "cpu").get("lastScaleReason"))
        ),
    )

    # The operator scales on the load reports instead: no HPA may scale the StatefulSet too.
    patch_brokers(api, k8s_namespace, "cpu", {"autoscaling": {"target": {"type": "LoadManager"}}})
    wait_for("the HPA deleted", lambda: hpa(api, k8s_namespace, "cpu") is None)
    wait_for_event(api, k8s_namespace, "cpu", "Normal", "AutoscalerDeleted")


def test_load_above_target_adds_brokers_up_to_max_and_below_it_removes_them_down_to_min_each_drained_first(
    api: client.ApiClient,
    k8s_namespace: str,
    timeline: Timeline,
    start_operator: Callable[..., Any],
    admins: BrokerAdmins,
) -> None:
    drainer = TimedDrainer(timeline, k8s_namespace)
    start_operator(
        load_reader=AdminLoadReader(url_of=admins.url_of),
        spreader=RecordingSpreader(timeline, k8s_namespace),
        drainer=drainer,
        autoscale_interval_s=0.5,
    )
    mark = len(timeline.snapshot())
    window_s = 3
    admins.load = {"cpu": 90.0}  # 90 % against 50 %: 2 brokers call for 4, max is 3
    scaling = {"min": 2, "max": 3, "target": {"type": "LoadManager", "averageUtilization": 50},
               "scaleDownStabilizationSeconds": window_s}  # fmt: skip
    create(api, k8s_namespace, "busy", {"autoscaling": scaling})
    wait_for("3 brokers", lambda: replicas(api, k8s_namespace, "busy") == 3, timeout_s=90)
    wait_for("busy-broker-2 ready", lambda: "busy-broker-2" in ready_brokers(api, k8s_namespace, "busy"))
    wait_for(
        "bundles moved onto busy-broker-2", lambda: timeline.of("spread", f"{k8s_namespace}/busy-broker-2")
    )
    state = autoscaling(api, k8s_namespace, "busy")
    assert state["desiredBrokers"] == 3, state
    assert "average utilization 90% against a target of 50%" in state["lastScaleReason"], state
    assert "at most autoscaling.max=3" in state["lastScaleReason"], state
    assert {"busy-broker-0", "busy-broker-1"} <= set(admins.asked), "each broker's own report was read"
    wait_for_event(api, k8s_namespace, "busy", "Normal", "ScaledUp")
    wait_for(
        "the move in the status",
        lambda: (
            "moved 1 bundle(s) onto busy-broker-2"
            in str(autoscaling(api, k8s_namespace, "busy").get("lastScaleReason"))
        ),
    )

    admins.load = {"cpu": 5.0}  # 3 brokers call for 1: min is 2
    wait_for("2 brokers", lambda: replicas(api, k8s_namespace, "busy") == 2, timeout_s=60)
    # the mock kubelet notes the removal just after deleting the pod: waiting for the pod alone
    # could read the timeline between the two
    wait_for(
        "busy-broker-2 gone",
        lambda: (
            ready_brokers(api, k8s_namespace, "busy") == ["busy-broker-0", "busy-broker-1"]
            and timeline.of("removed", f"{k8s_namespace}/busy-broker-2")
        ),
    )
    wait_for_event(api, k8s_namespace, "busy", "Normal", "ScaledDown")
    assert "busy-broker-2" in drainer.at, "the leaving broker's bundles were not moved off"
    # the window counts from the tick that read the last high figure (on a busy machine, the
    # ticks come late, and one can read well before the load was lowered): from its read, less
    # the moments the tick spent before it
    last_high = max(at for at, load in admins.answered if load["cpu"] > 50)
    waited = drainer.at["busy-broker-2"] - last_high
    assert waited >= window_s - 1, f"scaled down {waited:.1f} s after the last high figure, within the window"
    entries = [e for e in timeline.snapshot()[mark:] if e[1].startswith(f"{k8s_namespace}/busy-broker")]
    counts = [e[2] for e in entries if e[0] == "replicas" and e[1] == f"{k8s_namespace}/busy-broker"]
    assert counts == [2, 3, 2], "from min up to max, and back, never beyond"
    kinds = [(kind, subject.split("/", 1)[1], detail) for kind, subject, detail in entries]
    up = kinds.index(("replicas", "busy-broker", 3))
    drained = kinds.index(("drain", "busy-broker-2", None))
    down = kinds.index(("replicas", "busy-broker", 2), up)
    removed = kinds.index(("removed", "busy-broker-2", None))
    assert up < drained < down < removed, "the leaving broker's bundles moved before its replicas dropped"
    assert [s for k, s, _ in kinds if k == "drain"] == ["busy-broker-2"], "only the leaving broker drained"
    state = wait_for(
        "the status at 2 brokers",
        lambda: (s := autoscaling(api, k8s_namespace, "busy"))["currentBrokers"] == 2 and s,
    )
    assert state["desiredBrokers"] == 2, state
    assert "at least autoscaling.min=2" in state["lastScaleReason"], state
    assert "1 bundle(s) moved off busy-broker-2 first" in state["lastScaleReason"], state


def test_brokers_scaled_down_by_replicas_are_drained_first_too(
    api: client.ApiClient, k8s_namespace: str, timeline: Timeline, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    create(api, k8s_namespace, "fixed", {"replicas": 3})
    wait_for("3 brokers ready", lambda: len(ready_brokers(api, k8s_namespace, "fixed")) == 3, timeout_s=90)
    mark = len(timeline.snapshot())
    patch_brokers(api, k8s_namespace, "fixed", {"replicas": 2})
    wait_for(
        "fixed-broker-2 gone",
        lambda: (
            ready_brokers(api, k8s_namespace, "fixed") == ["fixed-broker-0", "fixed-broker-1"]
            and timeline.of("removed", f"{k8s_namespace}/fixed-broker-2")
        ),
    )
    kinds = [
        (k, s.split("/", 1)[1]) for k, s, _ in timeline.snapshot()[mark:] if s.startswith(f"{k8s_namespace}/")
    ]
    assert kinds.index(("drain", "fixed-broker-2")) < kinds.index(("removed", "fixed-broker-2")), kinds


LOAD = {"type": "LoadManager"}


@pytest.mark.parametrize(
    ("scaling", "says"),
    [
        ({"min": 3, "max": 2, "target": LOAD}, "autoscaling.max=2 is below autoscaling.min=3"),
        ({"min": 0, "max": 2, "target": LOAD}, "autoscaling.min: Input should be greater than or equal to 1"),
        ({"min": 1, "max": 2, "target": {"type": "Memory"}}, "'Memory' is not an autoscaling target"),
        ({"min": 1, "max": 2, "target": {"type": "CPU"}}, "target CPU needs brokers.resources.requests.cpu"),
    ],
)
def test_a_bad_autoscaling_spec_is_refused_by_the_operator_naming_the_problem(
    scaling: dict[str, Any], says: str
) -> None:
    with pytest.raises(SpecError) as refused:
        parse_cluster({"metadataStore": ZK, "brokers": {"autoscaling": scaling}}, "bad")
    assert says in str(refused.value)
