"""Which pods the operator reports as failing (a condition with the pod's reason and an Event) rather
than as still starting: the pod status shapes the kubelet and the scheduler write. Real pods show
the same on a node in tests/kube/test_operator_pods.py."""

from __future__ import annotations

from typing import Any

from magnetar.operator.kube_api import failing, pod_problem


def pod(name: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": status}


def waiting(reason: str, message: str = "", **extra: Any) -> dict[str, Any]:
    return {"name": "bookie", "state": {"waiting": {"reason": reason, "message": message}}, **extra}


def test_a_starting_pod_is_no_problem() -> None:
    assert pod_problem(pod("c-bookie-0", containerStatuses=[waiting("ContainerCreating")])) is None
    assert pod_problem(pod("c-bookie-0", phase="Pending")) is None
    assert (
        pod_problem(pod("c-bookie-0", containerStatuses=[{"name": "bookie", "state": {"running": {}}}]))
        is None
    )


def test_an_image_that_cannot_be_pulled_names_its_reason_and_message() -> None:
    status = [waiting("ImagePullBackOff", 'Back-off pulling image "magnetar:nope"')]
    assert pod_problem(pod("c-bookie-0", containerStatuses=status)) == (
        "ImagePullBackOff",
        'container bookie: Back-off pulling image "magnetar:nope"',
    )


def test_a_crash_loop_names_the_last_exit() -> None:
    last = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
    status = [waiting("CrashLoopBackOff", "back-off 20s", lastState=last)]
    reason, message = pod_problem(pod("c-bookie-0", containerStatuses=status)) or ("", "")
    assert reason == "CrashLoopBackOff"
    assert "OOMKilled" in message
    assert "137" in message


def test_a_pod_the_scheduler_cannot_place_names_the_schedulers_message() -> None:
    message = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    assert pod_problem(pod("c-bookie-0", phase="Pending", conditions=[unschedulable])) == (
        "Unschedulable",
        message,
    )


def test_failing_names_each_failing_pod_in_ordinal_order() -> None:
    pods = [
        pod("c-bookie-10", containerStatuses=[waiting("ErrImagePull", "refused")]),
        pod("c-bookie-2", containerStatuses=[waiting("ContainerCreating")]),
        pod("c-bookie-1", initContainerStatuses=[waiting("CreateContainerConfigError", "no secret")]),
    ]
    reasons, message = failing(pods)
    assert reasons == ["CreateContainerConfigError", "ErrImagePull"]
    assert message.index("c-bookie-1:") < message.index("c-bookie-10:")
    assert "c-bookie-2" not in message
