"""Fixtures of the operator suite: a real etcd + kube-apiserver (envtest's way) with the chart's
CRDs installed, the test-only mock kubelet, a fresh Kubernetes namespace per test, and the real
operator running in-process in its own thread and event loop."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from magnetar.kube.control_plane import ControlPlane, binaries_missing
from magnetar.operator.app import Deps, run
from magnetar.operator.gates import ClusterRef
from tests.operator.mock_kubelet import MockKubelet, Timeline

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "charts" / "magnetar" / "crds"
_names = itertools.count(1)


def wait_for(what: str, predicate: Callable[[], Any], timeout_s: float = 60.0, every_s: float = 0.2) -> Any:
    """Poll until ``predicate`` returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: last {value!r}")
        time.sleep(every_s)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    missing = binaries_missing()
    if missing:
        pytest.skip(f"Kubernetes test binaries {missing} not built: run `make k8s-testenv`")
    plane = ControlPlane(tmp_path_factory.mktemp("k8s"))
    plane.start()
    try:
        applied = plane.kubectl("apply", "-f", str(CRDS))
        assert applied.returncode == 0, applied.stderr
        established = plane.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            *(f"crd/{p.stem}.magnetar.dev" for p in CRDS.glob("magnetar*.yaml")),
        )
        assert established.returncode == 0, established.stderr
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def api(control_plane: ControlPlane) -> client.ApiClient:
    made: client.ApiClient = config.new_client_from_config(config_file=str(control_plane.kubeconfig))  # type: ignore[no-untyped-call]
    return made


@pytest.fixture(scope="session")
def timeline() -> Timeline:
    return Timeline()


@pytest.fixture(scope="session")
def kubelet(api: client.ApiClient, timeline: Timeline) -> Iterator[MockKubelet]:
    mock = MockKubelet(api, timeline)
    mock.start()
    yield mock
    mock.stop()


@pytest.fixture
def k8s_namespace(api: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"t{next(_names)}-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40]
    name = name.strip("-")
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    yield name
    # No controller manager runs here, so nothing would remove the test's objects, and the mock
    # kubelet goes through every StatefulSet it can list five times a second for the rest of the
    # run: the test's StatefulSets go, and the namespace, which then refuses new objects.
    client.AppsV1Api(api).delete_collection_namespaced_stateful_set(name)
    client.CoreV1Api(api).delete_namespace(name)


class OperatorThread:
    """The real operator in its own thread and event loop, stopped the way kopf stops."""

    def __init__(self, deps: Deps, namespace: str) -> None:
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.error: BaseException | None = None

        def main() -> None:
            try:
                asyncio.run(run(deps, namespaces=[namespace], stop_flag=self._stop, ready_flag=self._ready))
            except BaseException as exc:  # surfaced by the test through .error
                self.error = exc

        self._thread = threading.Thread(target=main, name=f"operator-{namespace}", daemon=True)

    def start(self) -> OperatorThread:
        self._thread.start()
        if not self._ready.wait(30):
            raise AssertionError(f"the operator did not start: {self.error!r}")
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the operator did not stop"


class RecordingGate:
    """Under-replication as the operator sees it: after each bookie pod is recreated, reports
    ``backlog`` under-replicated ledgers for that many checks, then 0 — and records each answer."""

    def __init__(self, timeline: Timeline, namespace: str, backlog: int = 2) -> None:
        self.timeline = timeline
        self.namespace = namespace
        self.backlog = backlog
        self.hold = False  # when set, reports 1 until cleared
        self._seen_restarts = 0
        self._left = 0

    async def under_replicated(self, cluster: ClusterRef) -> int:
        restarts = len(self.timeline.of("deleted", f"{self.namespace}/{cluster.name}-bookie-"))
        if restarts != self._seen_restarts:
            self._seen_restarts = restarts
            self._left = self.backlog
        answer = 1 if self.hold else 0
        if self._left:
            self._left -= 1
            answer = 1
        self.timeline.add("gate", f"{self.namespace}/{cluster.name}", answer)
        return answer

    async def decommission(self, cluster: ClusterRef, replicas: int) -> int:
        return 0  # no ledgers here: the mock kubelet's bookies store nothing


class RecordingDrainer:
    def __init__(self, timeline: Timeline, namespace: str) -> None:
        self.timeline = timeline
        self.namespace = namespace

    async def drain(self, cluster: ClusterRef, pod: dict[str, Any]) -> list[str]:
        self.timeline.add("drain", f"{self.namespace}/{pod['metadata']['name']}")
        return []


@pytest.fixture
def start_operator(
    api: client.ApiClient, k8s_namespace: str, timeline: Timeline, kubelet: MockKubelet
) -> Iterator[Callable[..., OperatorThread]]:
    running: list[OperatorThread] = []

    def start(**overrides: Any) -> OperatorThread:
        deps = Deps(
            api=overrides.pop("api", api),
            gate=overrides.pop("gate", RecordingGate(timeline, k8s_namespace)),
            drainer=overrides.pop("drainer", RecordingDrainer(timeline, k8s_namespace)),
            poll_s=0.5,
            mirror_interval_s=1.0,
            retry_s=1.0,
            health_interval_s=1.0,
            **overrides,
        )
        op = OperatorThread(deps, k8s_namespace).start()
        running.append(op)
        return op

    yield start
    for op in running:
        op.stop()


def get_cr(api: client.ApiClient, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
            "magnetar.dev", "v1alpha1", namespace, plural, name
        )
    except client.exceptions.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


def condition(obj: dict[str, Any] | None, kind: str = "Ready") -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def events(api: client.ApiClient, namespace: str, name: str) -> list[tuple[str, str, str]]:
    found = client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    )
    return [(e.type, e.reason, e.message) for e in found.items]


def wait_for_event(api: client.ApiClient, namespace: str, name: str, type_: str, reason: str) -> None:
    """Waits for an event kopf posts about ``name``: it posts events from a queue of its own, so an
    event can land after the status patch that a test waited for."""
    wait_for(
        f"{type_} event {reason} on {name}",
        lambda: (type_, reason) in {(t, r) for t, r, _ in events(api, namespace, name)},
    )
