"""Changes the API server refuses to make to a StatefulSet, made anyway: the orphan-delete-and-
recreate that Strimzi and KAAP do.

A StatefulSet's ``volumeClaimTemplates``, ``selector``, ``serviceName`` and ``podManagementPolicy``
cannot change once it exists (an apply is refused, HTTP 422). So the StatefulSet is deleted with
``propagationPolicy=Orphan``: its pods keep running, their owner reference taken off by the garbage
collector, and once the object is gone the next reconcile makes it again with the new spec; the new
StatefulSet adopts the pods, and the ordered roll (rollout.py) replaces them one at a time, since
their template hash covers the volumes. Claims that exist keep their size and class: a StatefulSet
makes a claim only for a pod that has none.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.utils import quantity

from magnetar.operator.kube_api import Kube

#: the part of the API server's refusal that says the change is to a field it never updates
_REFUSAL = "updates to statefulset spec for fields other than"
#: the fields of a StatefulSet's spec compared whole (its volumeClaimTemplates claim by claim)
_WHOLE = ("selector", "serviceName", "podManagementPolicy")


def refused_as_immutable(obj: dict[str, Any], exc: ApiException) -> bool:
    """Whether the API server refused ``obj`` for a change to a field of a StatefulSet's spec that
    never changes (rather than for an invalid value)."""
    if obj["kind"] != "StatefulSet" or exc.status != 422:
        return False
    with contextlib.suppress(TypeError, ValueError):
        return _REFUSAL in str(json.loads(exc.body or "").get("message", ""))
    return False


def _same(label: str, a: Any, b: Any) -> bool:
    if label == "storage":  # the API server writes a quantity back in its own canonical form
        with contextlib.suppress(TypeError, ValueError):
            return bool(quantity.parse_quantity(a) == quantity.parse_quantity(b))  # type: ignore[no-untyped-call]
    return bool(a == b)


def _claims(sts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for claim in sts["spec"].get("volumeClaimTemplates") or []:
        spec = claim.get("spec") or {}
        found[claim["metadata"]["name"]] = {
            "storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage"),
            "storageClassName": spec.get("storageClassName"),
            "accessModes": spec.get("accessModes"),
        }
    return found


def changes(live: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """What of the fields that never change differs, in words for an Event."""
    said = []
    for key in _WHOLE:
        if key in wanted["spec"] and live["spec"].get(key) != wanted["spec"][key]:
            said.append(f"{key} {live['spec'].get(key)!r} -> {wanted['spec'][key]!r}")
    before, after = _claims(live), _claims(wanted)
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old is None or new is None:
            said.append(f"volume claim {name} {'added' if old is None else 'removed'}")
            continue
        for label, value in new.items():
            if value is not None and not _same(label, old[label], value):
                said.append(f"volume claim {name} {label} {old[label]} -> {value}")
    return said


class Recreator:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def recreate(self, namespace: str, wanted: dict[str, Any]) -> tuple[str, bool]:
        """Start making StatefulSet ``wanted`` again: (what is happening, for the status and an
        Event; whether it was deleted by this call, so the Event is posted once)."""
        name = wanted["metadata"]["name"]
        live = await self.kube.statefulset(namespace, name)
        if live is None:
            return f"StatefulSet {name} is gone; it is made again with the new spec", False
        if live["metadata"].get("deletionTimestamp"):
            return f"waiting for StatefulSet {name} to go (its pods keep running) to make it again", False
        said = "; ".join(changes(live, wanted)) or "a field a StatefulSet cannot change"
        await self.kube.orphan_statefulset(namespace, name, live["metadata"]["uid"])
        message = (
            f"Deleted StatefulSet {name} with propagationPolicy=Orphan, its pods left running, to make it "
            f"again with a change the API server does not apply in place ({said}); its pods are then "
            "restarted in order"
        )
        return message, True
