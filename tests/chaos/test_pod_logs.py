"""Gathering the pods' logs into a run: a restarted pod's previous log is asked for again while
the API refuses it, and given up with the API's answer in the log; a pod that never restarted is
asked once. The API is a stand-in here; the pod tests gather real pods' logs."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from magnetar.chaos.pods import target


class Core:
    """read_namespaced_pod_log refusing the previous log ``refusals`` times, then answering."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.asked = 0

    def read_namespaced_pod_log(self, name: str, namespace: str, previous: bool) -> str:
        self.asked += 1
        if self.asked <= self.refusals:
            raise ApiException(status=400, reason="Bad Request")
        return f"{name} in {namespace}, previous={previous}"


def test_a_refused_previous_log_is_asked_again_until_it_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(target.time, "sleep", lambda _s: None)
    core: Any = Core(refusals=3)
    assert target._pod_log(core, "b-1", "lab", True, retry_s=10) == "b-1 in lab, previous=True"
    assert core.asked == 4


def test_a_pod_that_never_restarted_is_asked_once() -> None:
    core: Any = Core(refusals=1)
    assert target._pod_log(core, "b-1", "lab", True, retry_s=0) is None
    assert core.asked == 1


def test_a_previous_log_still_refused_is_given_up_with_the_apis_answer(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = iter(range(0, 100, 3))
    monkeypatch.setattr(target.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(target.time, "sleep", lambda _s: None)
    core: Any = Core(refusals=1000)
    with caplog.at_level(logging.WARNING, logger="chaostoolkit"):
        assert target._pod_log(core, "b-1", "lab", True, retry_s=10) is None
    assert 1 < core.asked < 10
    assert "pod b-1 restarted, but its previous container's log could not be read" in caplog.text
    assert "400 Bad Request" in caplog.text
