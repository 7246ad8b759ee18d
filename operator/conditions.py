"""Status conditions in Strimzi's (and Kubernetes') style: ``Ready``, ``Progressing`` and
``Degraded``, each with a status, a machine-readable reason and a message for people, stamped
with the ``observedGeneration`` they describe. A condition's ``lastTransitionTime`` moves only
when its status changes, so watching tools see real transitions, not every reconcile."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

Kind = Literal["Ready", "Progressing", "Degraded"]
TYPES: tuple[Kind, ...] = ("Ready", "Progressing", "Degraded")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions(
    previous: list[dict[str, Any]] | None,
    generation: int,
    *,
    ready: bool,
    progressing: bool,
    degraded: bool,
    reason: str,
    message: str,
) -> list[dict[str, Any]]:
    """The three conditions for one state; ``reason``/``message`` explain the state as a whole."""
    old = {c.get("type"): c for c in previous or []}
    wanted = {"Ready": ready, "Progressing": progressing, "Degraded": degraded}
    result = []
    for kind in TYPES:
        status = "True" if wanted[kind] else "False"
        before = old.get(kind)
        since = before["lastTransitionTime"] if before and before.get("status") == status else _now()
        result.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": since,
            }
        )
    return result


def status_patch(body: Any, **state: Any) -> dict[str, Any]:
    """``status`` fields for a resource ``body`` (a kopf Body or a dict) in the given state."""
    generation = int(body["metadata"].get("generation") or 0)
    previous = (body.get("status") or {}).get("conditions")
    return {
        "observedGeneration": generation,
        "conditions": conditions(previous, generation, **state),
    }


def ready(body: Any, reason: str, message: str) -> dict[str, Any]:
    return status_patch(body, ready=True, progressing=False, degraded=False, reason=reason, message=message)


def progressing(body: Any, reason: str, message: str) -> dict[str, Any]:
    return status_patch(body, ready=False, progressing=True, degraded=False, reason=reason, message=message)


def degraded(body: Any, reason: str, message: str) -> dict[str, Any]:
    return status_patch(body, ready=False, progressing=False, degraded=True, reason=reason, message=message)


def find(status: dict[str, Any] | None, kind: Kind) -> dict[str, Any] | None:
    return next((c for c in (status or {}).get("conditions") or [] if c.get("type") == kind), None)
