"""``MagnetarBundle`` actions: unload, transfer to a broker, split — each carried out once per
change of the spec. ``status.lastAction.generation`` records the generation an action was done
for, so a restarted operator (or a resync) never repeats it; clearing and setting the action
again (a new generation) asks for it again."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from magnetar.operator import conditions
from magnetar.operator.admin import AdminError
from magnetar.operator.kube_api import Kube
from magnetar.operator.namespaces import Unresolved, resolve
from magnetar.operator.resources import BundleSpec, SpecError


class BundleActions:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def act(self, body: Any, namespace: str) -> dict[str, Any] | None:
        """Carry out the spec's action if not done for this generation; the status to write."""
        try:
            spec = BundleSpec.model_validate(dict(body.get("spec") or {}))
        except ValidationError as exc:
            raise SpecError("InvalidSpec", str(exc.errors()[0]["msg"])) from None
        generation = int(body["metadata"].get("generation") or 0)
        done = ((body.get("status") or {}).get("lastAction") or {}).get("generation")
        if spec.action is None or done == generation:
            return None
        action = spec.action
        if action.type == "Transfer" and not action.destination_broker:
            raise SpecError("MissingDestination", "a Transfer needs spec.action.destinationBroker")
        admin, _ = await resolve(self.kube, body, namespace, spec.cluster)
        try:
            if spec.range not in await admin.bundle_names(spec.namespace):
                raise SpecError("UnknownBundle", f"{spec.range} is not a bundle of {spec.namespace} (now)")
            if action.type == "Split":
                result = await admin.split(spec.namespace, spec.range)
                message = f"Split {spec.range} into {', '.join(result.get('bundles', []))}"
            elif action.type == "Transfer":
                await admin.unload(spec.namespace, spec.range, action.destination_broker)
                message = f"Transferred {spec.range} to {action.destination_broker}"
            else:
                await admin.unload(spec.namespace, spec.range)
                message = f"Unloaded {spec.range}"
        except AdminError as exc:
            raise Unresolved("AdminError", str(exc), retry=exc.retriable) from None
        kopf.event(body, type="Normal", reason=f"{action.type}Done", message=message)
        at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        last = {"generation": generation, "type": action.type, "result": message, "at": at}
        state = "Split" if action.type == "Split" else "Moving"
        return conditions.ready(body, f"{action.type}Done", message) | {"lastAction": last, "state": state}
