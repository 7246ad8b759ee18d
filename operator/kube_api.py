"""The few Kubernetes calls the handlers make, as plain dicts, off the event loop.

The official client is synchronous; every call here runs in a worker thread so a slow API server
never stalls kopf's event loop. Objects are applied with server-side apply under one field
manager, so re-applying an unchanged manifest is a no-op and fields others own are left alone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from magnetar.operator.resources import GROUP, VERSION

FIELD_MANAGER = "magnetar-operator"
#: the manager of the brokers' count the operator's autoscaler sets (the scale subresource), as an
#: HPA's controller sets it under its own
AUTOSCALER_MANAGER = "magnetar-autoscaler"


def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """A client for ``kubeconfig``; without one, in-cluster credentials, then ~/.kube/config."""
    if kubeconfig:
        made: client.ApiClient = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        return made
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()


def _json(response: Any) -> Any:
    return json.loads(response.data)


class Kube:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.autoscaling = client.AutoscalingV2Api(api)
        self._dynamic: DynamicClient | None = None

    # -- generic --------------------------------------------------------------------------------
    @property
    def _dynamic_client(self) -> DynamicClient:
        if self._dynamic is None:
            self._dynamic = DynamicClient(self.api)  # type: ignore[no-untyped-call]
        return self._dynamic

    def _resource(self, api_version: str, kind: str) -> Any:
        return self._dynamic_client.resources.get(api_version=api_version, kind=kind)

    def _apply(self, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        resource = self._resource(obj["apiVersion"], obj["kind"])
        result = self._dynamic_client.server_side_apply(  # type: ignore[no-untyped-call]
            resource, body=obj, namespace=namespace, field_manager=FIELD_MANAGER, force_conflicts=True
        )
        applied: dict[str, Any] = result.to_dict()
        return applied

    async def apply(self, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        return await asyncio.to_thread(self._apply, obj, namespace)

    def _delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        resource = self._resource(api_version, kind)
        try:
            resource.delete(name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    async def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        """Delete an object; one already gone is no error."""
        await asyncio.to_thread(self._delete, api_version, kind, namespace, name)

    # -- pods and StatefulSets ------------------------------------------------------------------
    async def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        response = await asyncio.to_thread(
            self.core.list_namespaced_pod, namespace, label_selector=selector, _preload_content=False
        )
        items: list[dict[str, Any]] = _json(response)["items"]
        return items

    async def delete_pod(self, namespace: str, name: str) -> None:
        try:
            await asyncio.to_thread(self.core.delete_namespaced_pod, name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    async def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        body = {"metadata": {"annotations": annotations}}
        await asyncio.to_thread(self.core.patch_namespaced_pod, name, namespace, body)

    async def node_labels(self, name: str) -> dict[str, str] | None:
        """The labels of node ``name``; None when there is no such node."""
        try:
            response = await asyncio.to_thread(self.core.read_node, name, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        labels: dict[str, str] = _json(response)["metadata"].get("labels") or {}
        return labels

    async def serves(self, group: str, version: str, kind: str) -> bool:
        """Whether the API server serves ``kind`` of ``group/version`` (a CRD installed, say):
        asked each time, as a CRD may be installed or removed while the operator runs."""
        try:
            response = await asyncio.to_thread(
                self.custom.get_api_resources, group, version, _preload_content=False
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return any(r.get("kind") == kind for r in _json(response).get("resources") or [])

    async def statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await _read_or_none(self.apps.read_namespaced_stateful_set, namespace, name)

    async def scale_statefulset(self, namespace: str, name: str, replicas: int) -> None:
        """Set a StatefulSet's replicas through its scale subresource, as an HPA does."""
        body = {"spec": {"replicas": replicas}}
        await asyncio.to_thread(
            self.apps.patch_namespaced_stateful_set_scale, name, namespace, body,
            field_manager=AUTOSCALER_MANAGER,
        )  # fmt: skip

    async def autoscaler(self, namespace: str, name: str) -> dict[str, Any] | None:
        """HorizontalPodAutoscaler ``name`` (autoscaling/v2), None if there is none."""
        return await _read_or_none(
            self.autoscaling.read_namespaced_horizontal_pod_autoscaler, namespace, name
        )

    async def orphan_statefulset(self, namespace: str, name: str, uid: str) -> None:
        """Delete StatefulSet ``name`` (that one: ``uid``) and leave its pods running, ownerless:
        the garbage collector takes the owner references off them before the object goes."""
        options = client.V1DeleteOptions(
            propagation_policy="Orphan", preconditions=client.V1Preconditions(uid=uid)
        )
        try:
            await asyncio.to_thread(self.apps.delete_namespaced_stateful_set, name, namespace, body=options)
        except ApiException as exc:
            if exc.status not in (404, 409):  # gone already, or another one by that name now
                raise

    # -- Secrets (their data never reaches a log line or an exception message from here) -------
    async def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await _read_or_none(self.core.read_namespaced_secret, namespace, name)

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create ``body``; when it exists already (made meanwhile), the one that exists."""
        try:
            manifest: Any = body  # the client takes the dict as its V1Secret
            response = await asyncio.to_thread(
                self.core.create_namespaced_secret, namespace, manifest, _preload_content=False
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            found = await self.secret(namespace, body["metadata"]["name"])
            if found is None:
                raise
            return found
        created: dict[str, Any] = _json(response)
        return created

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        manifest: Any = body
        response = await asyncio.to_thread(
            self.core.replace_namespaced_secret, name, namespace, manifest, _preload_content=False
        )
        replaced: dict[str, Any] = _json(response)
        return replaced

    async def annotate_custom(
        self, plural: str, namespace: str, name: str, annotations: dict[str, str]
    ) -> None:
        await asyncio.to_thread(
            self.custom.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            plural,
            name,
            {"metadata": {"annotations": annotations}},
        )

    # -- our custom resources -------------------------------------------------------------------
    async def get_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            response = await asyncio.to_thread(
                self.custom.get_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                plural,
                name,
                _preload_content=False,
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        found: dict[str, Any] = _json(response)
        return found

    async def list_custom(self, plural: str, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        response = await asyncio.to_thread(
            self.custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            plural,
            label_selector=selector,
            _preload_content=False,
        )
        items: list[dict[str, Any]] = _json(response)["items"]
        return items

    async def create_custom(self, plural: str, namespace: str, body: dict[str, Any]) -> None:
        await asyncio.to_thread(
            self.custom.create_namespaced_custom_object, GROUP, VERSION, namespace, plural, body
        )

    async def patch_custom_status(
        self, plural: str, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        await asyncio.to_thread(
            self.custom.patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            namespace,
            plural,
            name,
            {"status": status},
        )

    async def delete_custom(self, plural: str, namespace: str, name: str) -> None:
        try:
            await asyncio.to_thread(
                self.custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, plural, name
            )
        except ApiException as exc:
            if exc.status != 404:
                raise


def pod_ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


#: container states that do not pass by themselves: the pod needs a change (its image, its spec)
#: or keeps failing; a user must hear of them, not just of a pod not ready yet
FAILING = frozenset({
    "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CrashLoopBackOff",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
})  # fmt: skip


def pod_problem(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of a pod that is failing rather than starting: a container waiting in a
    FAILING state, or the scheduler unable to place it (a PersistentVolumeClaim that cannot bind,
    too few resources); None otherwise."""
    status = pod.get("status") or {}
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FAILING:
            return waiting["reason"], _failure_message(container, waiting)
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason"):
            return cond["reason"], cond.get("message") or ""
    return None


def failing(pods: Iterable[dict[str, Any]]) -> tuple[list[str], str]:
    """The failing pods' reasons (in ordinal order) and one message naming each pod and its reason."""
    found = [(p["metadata"]["name"], pod_problem(p)) for p in sorted(pods, key=ordinal)]
    problems = [(name, problem) for name, problem in found if problem is not None]
    reasons = [reason for _, (reason, _) in problems]
    return reasons, "; ".join(f"{name}: {reason}: {message}" for name, (reason, message) in problems)


def _failure_message(container: dict[str, Any], waiting: dict[str, Any]) -> str:
    message = waiting.get("message") or ""
    last = (container.get("lastState") or {}).get("terminated") or {}
    if last:  # a crash loop's back-off message says nothing of the crash itself
        message += f" (last exit: {last.get('reason', '?')}, code {last.get('exitCode', '?')})"
    return f"container {container.get('name')}: {message}".strip()


def ordinal(pod: dict[str, Any]) -> int:
    return int(str(pod["metadata"]["name"]).rsplit("-", 1)[1])


async def _read_or_none(read: Callable[..., Any], namespace: str, name: str) -> dict[str, Any] | None:
    """A namespaced object as JSON, None if there is none."""
    try:
        response = await asyncio.to_thread(read, name, namespace, _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    found: dict[str, Any] = _json(response)
    return found
