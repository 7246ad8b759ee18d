"""Ordered rolling restarts and scale-downs, read from the mock kubelet's timeline: which pod went
when, what every other pod looked like at that moment, and what the gates answered before."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from kubernetes import client

from tests.operator.conftest import RecordingGate, condition, events, get_cr, wait_for, wait_for_event
from tests.operator.mock_kubelet import MockKubelet, Timeline

CUSTOM = ("magnetar.dev", "v1alpha1")


def create_cluster(
    api: client.ApiClient, namespace: str, name: str, bookies: int = 3, brokers: int = 2
) -> None:
    body = {
        "apiVersion": "magnetar.dev/v1alpha1",
        "kind": "MagnetarCluster",
        "metadata": {"name": name},
        "spec": {
            # An external metadata store: no ZooKeeper pods, so the timeline holds only ours.
            "metadataStore": {"url": "zk://zk.example:2181/roll"},
            "bookies": {"replicas": bookies},
            "brokers": {"replicas": brokers},
        },
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(*CUSTOM, namespace, "magnetarclusters", body)


def patch_spec(api: client.ApiClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        *CUSTOM, namespace, "magnetarclusters", name, {"spec": spec}
    )


def converged(api: client.ApiClient, namespace: str, name: str, generation: int) -> dict[str, Any] | None:
    obj = get_cr(api, "magnetarclusters", namespace, name)
    ready = condition(obj)
    if ready.get("status") == "True" and ready.get("observedGeneration") == generation:
        return obj
    return None


def since(timeline: Timeline, mark: int, namespace: str) -> list[tuple[str, str, Any]]:
    return [e for e in timeline.snapshot()[mark:] if e[1].startswith(f"{namespace}/")]


def short(subject: str) -> str:
    return subject.split("/", 1)[1]


def drained_before_deleted(entries: list[tuple[str, str, Any]], brokers: list[str]) -> None:
    """Each broker was drained before its pod went."""
    for name in brokers:
        drain = next(i for i, e in enumerate(entries) if e[0] == "drain" and short(e[1]) == name)
        gone = next(i for i, e in enumerate(entries) if e[0] == "deleted" and short(e[1]) == name)
        assert drain < gone, name


def test_a_spec_change_restarts_bookies_one_at_a_time_then_drains_and_restarts_brokers(
    api: client.ApiClient, k8s_namespace: str, timeline: Timeline, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    create_cluster(api, k8s_namespace, "roll")
    wait_for("roll Ready", lambda: converged(api, k8s_namespace, "roll", 1))
    mark = len(timeline.snapshot())

    change = {
        "bookies": {"config": {"journal_max_group_wait_msec": 5}},
        "brokers": {"config": {"max_message_size": 1048576}},
    }
    patch_spec(api, k8s_namespace, "roll", change)
    wait_for(
        "roll converged on generation 2", lambda: converged(api, k8s_namespace, "roll", 2), timeout_s=120
    )
    entries = since(timeline, mark, k8s_namespace)

    deleted = [short(s) for kind, s, _ in entries if kind == "deleted"]
    assert deleted == ["roll-bookie-2", "roll-bookie-1", "roll-bookie-0", "roll-broker-1", "roll-broker-0"]
    # One at a time: when a bookie went, every other bookie was up and ready.
    for kind, subject, ready_peers in entries:
        if kind == "deleted" and "bookie" in short(subject):
            others = {f"roll-bookie-{i}" for i in range(3)} - {short(subject)}
            assert others <= set(ready_peers), (subject, ready_peers)
    # Before each later bookie went, the gate reported under-replicated ledgers, and then none.
    bookie_deletions = [i for i, e in enumerate(entries) if e[0] == "deleted" and "bookie" in short(e[1])]
    for before, after in itertools.pairwise(bookie_deletions):
        answers = [e[2] for e in entries[before:after] if e[0] == "gate"]
        assert 1 in answers
        assert answers[-1] == 0
    drained_before_deleted(entries, ["roll-broker-1", "roll-broker-0"])
    # Every pod came back with the new template.
    sets = {
        s.metadata.name: s for s in client.AppsV1Api(api).list_namespaced_stateful_set(k8s_namespace).items
    }
    for pod in client.CoreV1Api(api).list_namespaced_pod(k8s_namespace).items:
        owner = pod.metadata.owner_references[0].name
        want = sets[owner].spec.template.metadata.annotations["magnetar.dev/config-hash"]
        assert pod.metadata.annotations["magnetar.dev/config-hash"] == want
    wait_for(
        "5 RestartingPod events",
        lambda: [r for _, r, _ in events(api, k8s_namespace, "roll")].count("RestartingPod") == 5,
    )


def test_a_new_brokers_restarted_at_restarts_only_the_brokers_each_drained_first(
    api: client.ApiClient, k8s_namespace: str, timeline: Timeline, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    create_cluster(api, k8s_namespace, "again")
    wait_for("again Ready", lambda: converged(api, k8s_namespace, "again", 1))
    mark = len(timeline.snapshot())

    patch_spec(api, k8s_namespace, "again", {"brokers": {"restartedAt": "2026-11-26T08:00:00Z"}})
    wait_for(
        "again converged on generation 2", lambda: converged(api, k8s_namespace, "again", 2), timeout_s=120
    )
    entries = since(timeline, mark, k8s_namespace)
    deleted = [short(s) for kind, s, _ in entries if kind == "deleted"]
    assert deleted == ["again-broker-1", "again-broker-0"], "the brokers, one at a time; no bookie"
    drained_before_deleted(entries, deleted)
    sts = client.AppsV1Api(api).read_namespaced_stateful_set("again-broker", k8s_namespace)
    assert sts.spec.template.metadata.annotations["magnetar.dev/restarted-at"] == "2026-11-26T08:00:00Z"


def test_scaling_bookies_down_removes_one_at_a_time_highest_first(
    api: client.ApiClient, k8s_namespace: str, timeline: Timeline, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    create_cluster(api, k8s_namespace, "shrink", bookies=4, brokers=1)
    wait_for("shrink Ready", lambda: converged(api, k8s_namespace, "shrink", 1))
    mark = len(timeline.snapshot())

    patch_spec(api, k8s_namespace, "shrink", {"bookies": {"replicas": 2}})
    wait_for("shrink at 2 bookies", lambda: converged(api, k8s_namespace, "shrink", 2), timeout_s=120)
    entries = since(timeline, mark, k8s_namespace)
    steps = [e[2] for e in entries if e[0] == "replicas" and e[1].endswith("/shrink-bookie")]
    assert steps == [3, 2]
    removed = [short(e[1]) for e in entries if e[0] == "removed"]
    assert removed == ["shrink-bookie-3", "shrink-bookie-2"]
    # The second step waited until the gate saw no under-replicated ledger.
    first, second = (i for i, e in enumerate(entries) if e[0] == "replicas")
    assert [e[2] for e in entries[first:second] if e[0] == "gate"][-1] == 0


def test_an_operator_restart_mid_roll_resumes_without_repeating_a_restart(
    api: client.ApiClient, k8s_namespace: str, timeline: Timeline, start_operator: Callable[..., Any]
) -> None:
    first_gate = RecordingGate(timeline, k8s_namespace, backlog=10**9)  # stuck after 1st restart
    first = start_operator(gate=first_gate)
    create_cluster(api, k8s_namespace, "resume", bookies=3, brokers=1)
    wait_for("resume Ready", lambda: converged(api, k8s_namespace, "resume", 1))
    mark = len(timeline.snapshot())

    patch_spec(api, k8s_namespace, "resume", {"bookies": {"config": {"journal_max_group_wait_msec": 7}}})
    wait_for(
        "the first restart, then a wait for replication",
        lambda: (
            [e for e in since(timeline, mark, k8s_namespace) if e[0] == "deleted"]
            and any(e[0] == "gate" and e[2] == 1 for e in since(timeline, mark, k8s_namespace))
        ),
        timeout_s=60,
    )
    # the gate answers before the handler writes the status that says so: wait for the status
    wait_for(
        "the status to say it waits for replication",
        lambda: (
            condition(get_cr(api, "magnetarclusters", k8s_namespace, "resume"), "Progressing")["reason"]
            == "WaitingForReplication"
        ),
        timeout_s=30,
    )
    first.stop()

    start_operator(gate=RecordingGate(timeline, k8s_namespace))
    wait_for("resume converged", lambda: converged(api, k8s_namespace, "resume", 2), timeout_s=120)
    deleted = [short(e[1]) for e in since(timeline, mark, k8s_namespace) if e[0] == "deleted"]
    assert deleted == ["resume-bookie-2", "resume-bookie-1", "resume-bookie-0"]


def test_a_pod_that_stops_being_ready_degrades_a_converged_cluster_until_it_recovers(
    api: client.ApiClient, k8s_namespace: str, kubelet: MockKubelet, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    create_cluster(api, k8s_namespace, "health", bookies=2, brokers=1)
    wait_for("health Ready", lambda: converged(api, k8s_namespace, "health", 1))

    kubelet.may_become_ready = lambda pod: pod["metadata"]["name"] != "health-bookie-1"
    try:
        client.CoreV1Api(api).delete_namespaced_pod("health-bookie-1", k8s_namespace)  # it "crashed"
        degraded = wait_for(
            "Degraded PodsNotReady",
            lambda: (
                (c := condition(get_cr(api, "magnetarclusters", k8s_namespace, "health"), "Degraded")).get(
                    "reason"
                )
                == "PodsNotReady"
                and c
            ),
        )
        assert degraded["status"] == "True"
        assert "bookie: 1/2 ready" in degraded["message"]
        wait_for_event(api, k8s_namespace, "health", "Warning", "PodsNotReady")
    finally:
        kubelet.may_become_ready = lambda _pod: True
    recovered = wait_for("Ready again", lambda: converged(api, k8s_namespace, "health", 1))
    assert condition(recovered, "Degraded")["status"] == "False"


def test_a_new_clusters_bookies_and_brokers_are_made_once_its_zookeeper_is_ready(
    api: client.ApiClient,
    k8s_namespace: str,
    kubelet: MockKubelet,
    timeline: Timeline,
    start_operator: Callable[..., Any],
) -> None:
    """Started beside a ZooKeeper still starting they would share its CPU and time out connecting
    to it; a StatefulSet that exists is still applied while ZooKeeper is not ready."""
    apps = client.AppsV1Api(api)

    def sets() -> set[str]:
        return {s.metadata.name for s in apps.list_namespaced_stateful_set(k8s_namespace).items}

    held = "staged-zookeeper-0"
    kubelet.may_become_ready = lambda pod: pod["metadata"]["name"] != held
    try:
        start_operator()
        spec = {"bookies": {"replicas": 2}, "brokers": {"replicas": 1}}  # ZooKeeper of its own
        body = {"apiVersion": "magnetar.dev/v1alpha1", "kind": "MagnetarCluster",
                "metadata": {"name": "staged"}, "spec": spec}  # fmt: skip
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            *CUSTOM, k8s_namespace, "magnetarclusters", body
        )
        waiting = wait_for(
            "the status to say it waits for ZooKeeper",
            lambda: (
                c
                if "zookeeper: 0/1 ready"
                in (
                    c := condition(get_cr(api, "magnetarclusters", k8s_namespace, "staged"), "Progressing")
                ).get("message", "")
                else None
            ),
        )
        assert waiting["status"] == "True"
        assert sets() == {"staged-zookeeper"}
    finally:
        kubelet.may_become_ready = lambda _pod: True
    wait_for("staged Ready", lambda: converged(api, k8s_namespace, "staged", 1))
    assert sets() == {"staged-zookeeper", "staged-bookie", "staged-broker"}
    entries = since(timeline, 0, k8s_namespace)
    zookeeper_ready = next(i for i, e in enumerate(entries) if e[0] == "ready" and short(e[1]) == held)
    created = [i for i, e in enumerate(entries) if e[0] == "created" and "zookeeper" not in e[1]]
    assert created, entries
    assert min(created) > zookeeper_ready, entries

    # Once made, a StatefulSet follows the spec whether ZooKeeper is ready or not.
    kubelet.may_become_ready = lambda pod: pod["metadata"]["name"] != held
    try:
        client.CoreV1Api(api).delete_namespaced_pod(held, k8s_namespace)
        before = apps.read_namespaced_stateful_set("staged-bookie", k8s_namespace).spec.template.metadata
        patch_spec(api, k8s_namespace, "staged", {"bookies": {"config": {"journal_max_group_wait_msec": 3}}})
        wait_for(
            "the bookies' StatefulSet changed",
            lambda: (
                apps.read_namespaced_stateful_set(
                    "staged-bookie", k8s_namespace
                ).spec.template.metadata.annotations
                != before.annotations
            ),
        )
    finally:
        kubelet.may_become_ready = lambda _pod: True
    wait_for("staged Ready again", lambda: converged(api, k8s_namespace, "staged", 2), timeout_s=120)
