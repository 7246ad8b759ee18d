"""Version upgrades and changes a StatefulSet cannot take in place, read from the mock kubelet's
timeline and the resource's status as a watch delivers each write of it: the stages in order,
each one's pods current and ready before the next stage's first restart, a stage that fails
halting the upgrade Degraded until a new spec reverts or resumes it, and a volume claim template
applied by deleting the StatefulSet with its pods orphaned and making it again."""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch

from magnetar.kube.control_plane import BIN, ControlPlane
from tests.operator.conftest import condition, events, get_cr, wait_for, wait_for_event
from tests.operator.mock_kubelet import MockKubelet, Timeline
from tests.operator.test_rollout import CUSTOM, converged, patch_spec, short, since

BAD = "magnetar:bad"


def create(api: client.ApiClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    body = {"apiVersion": "magnetar.dev/v1alpha1", "kind": "MagnetarCluster",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip
    client.CustomObjectsApi(api).create_namespaced_custom_object(*CUSTOM, namespace, "magnetarclusters", body)


def upgrade(obj: dict[str, Any] | None) -> tuple[Any, Any, Any]:
    found = ((obj or {}).get("status") or {}).get("upgrade") or {}
    return found.get("stage"), found.get("currentVersion"), found.get("targetVersion")


class StatusWatch:
    """Every ``status.upgrade`` the API server holds for one resource, in order, from a watch
    (which delivers each write, where polling could miss a short stage)."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, resource_version: str) -> None:
        self.seen: list[tuple[Any, Any, Any]] = []
        self._watch = watch.Watch()
        custom = client.CustomObjectsApi(api)

        def run() -> None:
            with contextlib.suppress(urllib3.exceptions.HTTPError):  # the stop ends the response
                self._record(custom, namespace, name, resource_version)

        self._thread = threading.Thread(target=run, name=f"watch-{name}", daemon=True)
        self._thread.start()

    def _record(self, custom: client.CustomObjectsApi, namespace: str, name: str, version: str) -> None:
        for event in self._watch.stream(
            custom.list_namespaced_custom_object, *CUSTOM, namespace, "magnetarclusters",
            field_selector=f"metadata.name={name}", resource_version=version, timeout_seconds=300,
        ):  # fmt: skip
            if (state := upgrade(event["object"])) != (self.seen[-1:] or [None])[0]:
                self.seen.append(state)

    def stop(self) -> None:
        self._watch.stop()

    def stages(self) -> list[Any]:
        return [s for i, (s, _, _) in enumerate(self.seen) if i == 0 or self.seen[i - 1][0] != s]


def pod_images(api: client.ApiClient, namespace: str) -> dict[str, str]:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
    return {p.metadata.name: p.spec.containers[0].image for p in pods}


def test_a_new_image_rolls_zookeeper_then_bookies_then_brokers_and_the_status_shows_each_stage(
    api: client.ApiClient,
    k8s_namespace: str,
    kubelet: MockKubelet,
    timeline: Timeline,
    start_operator: Callable[..., Any],
) -> None:
    start_operator()
    create(api, k8s_namespace, "up", {"bookies": {"replicas": 2}, "brokers": {"replicas": 2}})
    before = wait_for("up Ready", lambda: converged(api, k8s_namespace, "up", 1))
    assert upgrade(before) == ("done", "0.1.0", "0.1.0")
    mark = len(timeline.snapshot())
    seen = StatusWatch(api, k8s_namespace, "up", before["metadata"]["resourceVersion"])
    # ZooKeeper's StatefulSet rolls its one pod by itself, and the mock kubelet does it in three
    # of its ticks: on a busy machine, sooner than the operator's pass that changed the template
    # looks at the roll. A real pod takes seconds to start: the new one here becomes ready only
    # once the status has shown its stage (an operator that never shows it fails the wait).
    kubelet.may_become_ready = lambda pod: (
        pod["spec"]["containers"][0]["image"] != "zookeeper:3.9.4" or "zookeeper" in seen.stages()
    )
    try:
        patch_spec(api, k8s_namespace, "up", {
            "image": "registry.example:5000/magnetar:0.2.0",
            "metadataStore": {"zookeeper": {"image": "zookeeper:3.9.4"}},
        })  # fmt: skip
        after = wait_for("up upgraded", lambda: converged(api, k8s_namespace, "up", 2), timeout_s=120)
    finally:
        kubelet.may_become_ready = lambda _pod: True
        seen.stop()
    assert upgrade(after) == ("done", "0.2.0", "0.2.0")
    # from the spec's change (the status still as it was) to the end
    assert seen.stages() == ["done", "zookeeper", "bookies", "brokers", "done"], seen.seen
    assert all((c, t) == ("0.1.0", "0.2.0") for s, c, t in seen.seen if s != "done"), seen.seen

    entries = since(timeline, mark, k8s_namespace)
    deleted = [short(s) for kind, s, _ in entries if kind == "deleted"]
    assert deleted == ["up-zookeeper-0", "up-bookie-1", "up-bookie-0", "up-broker-1", "up-broker-0"]
    # The next stage's first restart came after the stage before was current and ready again.
    ready = {short(s): i for i, (kind, s, _) in enumerate(entries) if kind == "ready"}
    first_gone = {short(s): i for i, (kind, s, _) in reversed(list(enumerate(entries))) if kind == "deleted"}
    assert ready["up-zookeeper-0"] < first_gone["up-bookie-1"], entries
    assert max(ready["up-bookie-1"], ready["up-bookie-0"]) < first_gone["up-broker-1"], entries
    images = pod_images(api, k8s_namespace)
    assert images.pop("up-zookeeper-0") == "zookeeper:3.9.4"
    assert set(images.values()) == {"registry.example:5000/magnetar:0.2.0"}, images


@pytest.mark.parametrize(("then", "image"), [("reverted", "magnetar:0.1.0"), ("resumed", "magnetar:0.2.0")])
def test_an_image_that_never_becomes_ready_halts_the_upgrade_degraded_until_a_new_spec(
    then: str,
    image: str,
    api: client.ApiClient,
    k8s_namespace: str,
    kubelet: MockKubelet,
    timeline: Timeline,
    start_operator: Callable[..., Any],
) -> None:
    start_operator(ready_deadline_s=2.0)
    spec = {"metadataStore": {"url": "zk://zk.example:2181/up"}, "bookies": {"replicas": 3},
            "brokers": {"replicas": 1}}  # fmt: skip
    create(api, k8s_namespace, "halt", spec)
    wait_for("halt Ready", lambda: converged(api, k8s_namespace, "halt", 1))
    mark = len(timeline.snapshot())

    kubelet.may_become_ready = lambda pod: pod["spec"]["containers"][0]["image"] != BAD
    try:
        patch_spec(api, k8s_namespace, "halt", {"image": BAD})
        halted = wait_for(
            "Degraded ProgressDeadlineExceeded",
            lambda: (
                obj
                if condition(obj := get_cr(api, "magnetarclusters", k8s_namespace, "halt"), "Degraded").get(
                    "reason"
                )
                == "ProgressDeadlineExceeded"
                else None
            ),
        )
        degraded = condition(halted, "Degraded")
        assert degraded["status"] == "True"
        assert f"halt-bookie-2 (image {BAD}) not ready 2 s" in degraded["message"], degraded
        assert upgrade(halted) == ("bookies", "0.1.0", "bad")
        wait_for_event(api, k8s_namespace, "halt", "Warning", "ProgressDeadlineExceeded")
        patch_spec(api, k8s_namespace, "halt", {"image": image})
        done = wait_for(f"halt {then}", lambda: converged(api, k8s_namespace, "halt", 3), timeout_s=120)
    finally:
        kubelet.may_become_ready = lambda _pod: True
    version = image.split(":")[1]
    assert upgrade(done) == ("done", version, version)
    assert condition(done, "Degraded")["status"] == "False"
    deleted = [short(s) for kind, s, _ in since(timeline, mark, k8s_namespace) if kind == "deleted"]
    # Halted, nothing further was restarted: the broken pod went once more, to the new spec's image.
    after = {"reverted": [], "resumed": ["halt-bookie-1", "halt-bookie-0", "halt-broker-0"]}[then]
    assert deleted == ["halt-bookie-2", "halt-bookie-2", *after], deleted
    assert set(pod_images(api, k8s_namespace).values()) == {image}
    wait_for_event(api, k8s_namespace, "halt", "Normal", "ReplacingPod")


@pytest.fixture
def garbage_collector(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Kubernetes' own garbage collector (kube-controller-manager running that controller only):
    a StatefulSet deleted with its pods orphaned is gone only once it has taken their owner
    references off."""
    binary = BIN / "kube-controller-manager"
    if not binary.is_file():
        pytest.skip("kube-controller-manager not built: run `make kube-node`")
    log = (tmp_path_factory.mktemp("gc") / "kube-controller-manager.log").open("wb")
    proc = subprocess.Popen(
        [str(binary), f"--kubeconfig={control_plane.kubeconfig}", "--controllers=garbagecollector",
         "--leader-elect=false", "--secure-port=0"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_a_new_volume_claim_size_is_applied_by_orphaning_and_remaking_the_statefulset(
    api: client.ApiClient,
    k8s_namespace: str,
    timeline: Timeline,
    garbage_collector: None,
    start_operator: Callable[..., Any],
) -> None:
    start_operator()
    spec = {"metadataStore": {"url": "zk://zk.example:2181/up"}, "bookies": {"replicas": 3},
            "brokers": {"replicas": 1}}  # fmt: skip
    create(api, k8s_namespace, "grow", spec)
    wait_for("grow Ready", lambda: converged(api, k8s_namespace, "grow", 1))
    apps = client.AppsV1Api(api)
    old_uid = apps.read_namespaced_stateful_set("grow-bookie", k8s_namespace).metadata.uid
    mark = len(timeline.snapshot())

    patch_spec(api, k8s_namespace, "grow", {"bookies": {"storage": {"journal": "2Gi"}}})
    wait_for("grow on generation 2", lambda: converged(api, k8s_namespace, "grow", 2), timeout_s=120)
    sts = apps.read_namespaced_stateful_set("grow-bookie", k8s_namespace)
    assert sts.metadata.uid != old_uid, "made again"
    claims = {c.metadata.name: c.spec.resources.requests["storage"] for c in sts.spec.volume_claim_templates}
    assert claims == {"journal": "2Gi", "ledgers": "5Gi"}
    wait_for_event(api, k8s_namespace, "grow", "Normal", "RecreatingStatefulSet")
    said = [m for _, r, m in events(api, k8s_namespace, "grow") if r == "RecreatingStatefulSet"]
    assert len(said) == 1, said
    assert "volume claim journal storage 1Gi -> 2Gi" in said[0], said
    assert "Refused" not in {r for _, r, _ in events(api, k8s_namespace, "grow")}
    # The pods were never all gone: the orphaned ones ran on, then went one at a time, in order.
    entries = since(timeline, mark, k8s_namespace)
    deleted = [(short(s), peers) for kind, s, peers in entries if kind == "deleted"]
    assert [d for d, _ in deleted] == ["grow-bookie-2", "grow-bookie-1", "grow-bookie-0"], deleted
    for name, peers in deleted:
        assert {f"grow-bookie-{i}" for i in range(3)} - {name} <= set(peers), (name, peers)
    owners = {
        p.metadata.name: [o.uid for o in p.metadata.owner_references or []]
        for p in client.CoreV1Api(api).list_namespaced_pod(k8s_namespace).items
        if "bookie" in p.metadata.name
    }
    assert owners == {f"grow-bookie-{i}": [sts.metadata.uid] for i in range(3)}, owners
