"""Test-only stand-in for the StatefulSet controller and the kubelet (Strimzi's MockKube pattern):
no kubelet runs beside the test API server, so this turns each StatefulSet into its pods, marks
them Ready, recreates deleted ones from the current template and removes those past ``replicas``.
A ``RollingUpdate`` StatefulSet (ZooKeeper's) has its pods of an older template deleted as the
StatefulSet controller does: the highest ordinal first, one at a time, each once all are ready.

It also records what happened, in order, into a shared :class:`Timeline`, so tests can assert
the order of restarts without timing anything.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

CONFIG_HASH = "magnetar.dev/config-hash"


@dataclass
class Timeline:
    """An ordered, thread-safe record: ``(kind, subject, detail)``."""

    entries: list[tuple[str, str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, subject: str, detail: Any = None) -> None:
        with self._lock:
            self.entries.append((kind, subject, detail))

    def snapshot(self) -> list[tuple[str, str, Any]]:
        with self._lock:
            return list(self.entries)

    def of(self, kind: str, prefix: str = "") -> list[tuple[str, str, Any]]:
        return [e for e in self.snapshot() if e[0] == kind and e[1].startswith(prefix)]


class MockKubelet:
    def __init__(self, api: client.ApiClient, timeline: Timeline, *, interval_s: float = 0.2) -> None:
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.timeline = timeline
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mock-kubelet", daemon=True)
        self._known: dict[str, str] = {}  # namespace/pod -> uid seen last tick
        self._replicas: dict[str, int] = {}  # namespace/sts -> replicas seen last tick
        #: called before a pod is marked Ready; returning False keeps it unready this tick
        self.may_become_ready: Callable[[dict[str, Any]], bool] = lambda _pod: True

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except ApiException as exc:
                if exc.status not in (404, 409):
                    self.timeline.add("mock-error", str(exc.status), exc.reason)
            except Exception as exc:  # keep going: a dead mock would stall every test after it
                self.timeline.add("mock-error", type(exc).__name__, traceback.format_exc())
            self._stop.wait(self.interval_s)

    def tick(self) -> None:
        seen: dict[str, str] = {}
        listed: set[str] = set()
        for sts in self.apps.list_stateful_set_for_all_namespaces().items:
            ns, name = sts.metadata.namespace, sts.metadata.name
            replicas = sts.spec.replicas or 0
            key = f"{ns}/{name}"
            listed.add(key)
            if self._replicas.get(key) != replicas:
                self._replicas[key] = replicas
                self.timeline.add("replicas", key, replicas)
            selector = ",".join(f"{k}={v}" for k, v in sts.spec.selector.match_labels.items())
            pods = {
                p.metadata.name: p for p in self.core.list_namespaced_pod(ns, label_selector=selector).items
            }
            for pod_name, pod in pods.items():
                seen[f"{ns}/{pod_name}"] = pod.metadata.uid
            for ordinal in range(replicas):
                pod_name = f"{name}-{ordinal}"
                if pod_name not in pods:
                    if f"{ns}/{pod_name}" in self._known:
                        self.timeline.add("deleted", f"{ns}/{pod_name}", self._ready_peers(pods, pod_name))
                    # Read the StatefulSet again: the pod went after the list above, and whoever
                    # deleted it may have changed the template first; a pod must get the newest.
                    fresh = self.apps.read_namespaced_stateful_set(name, ns)
                    self._create_pod(fresh, pod_name)
                    self.timeline.add("created", f"{ns}/{pod_name}", _hash(fresh.spec.template.metadata))
                    continue
                pod = pods[pod_name]
                if not _ready(pod) and pod.metadata.deletion_timestamp is None:
                    body = client.ApiClient().sanitize_for_serialization(pod)
                    if self.may_become_ready(body):
                        self._mark_ready(ns, pod_name)
                        self.timeline.add("ready", f"{ns}/{pod_name}", _hash(pod.metadata))
            for pod_name in sorted(pods, reverse=True):
                if int(pod_name.rsplit("-", 1)[1]) >= replicas:
                    self.core.delete_namespaced_pod(pod_name, ns)
                    self.timeline.add("removed", f"{ns}/{pod_name}")
            if (sts.spec.update_strategy.type or "RollingUpdate") == "RollingUpdate":
                self._roll(sts, pods)
            self._update_status(sts, pods)
        # a StatefulSet deleted with its pods orphaned, to be made again: its pods are still known
        kept = {k: uid for k, uid in self._known.items() if k.rsplit("-", 1)[0] not in listed}
        self._known = kept | seen

    def _roll(self, sts: Any, pods: dict[str, Any]) -> None:
        members = [pods.get(f"{sts.metadata.name}-{i}") for i in range(sts.spec.replicas or 0)]
        if not all(p is not None and _ready(p) for p in members):
            return
        want = _hash(sts.spec.template.metadata)
        outdated = [p for p in members if p is not None and _hash(p.metadata) != want]
        if outdated:
            self.core.delete_namespaced_pod(outdated[-1].metadata.name, sts.metadata.namespace)

    @staticmethod
    def _ready_peers(pods: dict[str, Any], missing: str) -> list[str]:
        return sorted(n for n, p in pods.items() if n != missing and _ready(p))

    def _create_pod(self, sts: Any, pod_name: str) -> None:
        template = sts.spec.template
        spec = client.ApiClient().sanitize_for_serialization(template.spec)
        # What the StatefulSet controller adds: a volume per claim template, and the identity.
        volumes = spec.setdefault("volumes", [])
        for claim in sts.spec.volume_claim_templates or []:
            claim_name = f"{claim.metadata.name}-{pod_name}"
            volumes.append({"name": claim.metadata.name, "persistentVolumeClaim": {"claimName": claim_name}})
        spec["hostname"] = pod_name
        spec["subdomain"] = sts.spec.service_name
        labels = dict(template.metadata.labels or {}) | {"statefulset.kubernetes.io/pod-name": pod_name}
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "labels": labels,
                "annotations": dict(template.metadata.annotations or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "StatefulSet",
                        "name": sts.metadata.name,
                        "uid": sts.metadata.uid,
                        "controller": True,
                    }
                ],
            },
            "spec": spec,
        }
        self.core.create_namespaced_pod(sts.metadata.namespace, body)

    def _mark_ready(self, namespace: str, pod_name: str) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                ],
            }
        }
        self.core.patch_namespaced_pod_status(pod_name, namespace, status)

    def _update_status(self, sts: Any, pods: dict[str, Any]) -> None:
        ready = sum(1 for p in pods.values() if _ready(p))
        status = {"status": {"replicas": len(pods), "readyReplicas": ready,
                             "observedGeneration": sts.metadata.generation}}  # fmt: skip
        if (sts.status.ready_replicas or 0) != ready or (sts.status.replicas or 0) != len(pods):
            self.apps.patch_namespaced_stateful_set_status(sts.metadata.name, sts.metadata.namespace, status)


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


def _hash(meta: Any) -> str | None:
    return (meta.annotations or {}).get(CONFIG_HASH)
