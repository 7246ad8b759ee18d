"""A MagnetarCluster's version and the stage of its upgrade, for ``status.upgrade``.

The version is the tag of the cluster's image (``spec.image``). ``currentVersion`` is the one every
pod ran when the cluster last converged, ``targetVersion`` the spec's; ``stage`` is where the
ordered roll is (rollout.py): ``zookeeper``, ``bookies``, ``brokers``, or ``done`` once every pod is
ready and current, when the target becomes the current version. The status is the only memory
of the version the cluster came from, so a restarted operator reports the same upgrade.
"""

from __future__ import annotations

from typing import Any

DONE = "done"
#: a roll's component -> the stage it is part of
STAGES = {"zookeeper": "zookeeper", "bookie": "bookies", "broker": "brokers", "broker-readonly": "brokers"}


def version(image: str) -> str:
    """The tag of an image reference (its digest when pinned by one), ``latest`` when untagged."""
    name, at, digest = image.partition("@")
    if at:
        return digest
    last = name.rsplit("/", 1)[-1]  # a registry's port is not a tag
    _, colon, tag = last.rpartition(":")
    return tag if colon else "latest"


def status(previous: dict[str, Any] | None, image: str, component: str | None) -> dict[str, Any]:
    """``status.upgrade`` for a cluster whose spec names ``image`` and whose roll is at
    ``component`` (None: every pod ready and current)."""
    target = version(image)
    if component is None:
        return {"stage": DONE, "currentVersion": target, "targetVersion": target}
    # before the first convergence there is no current version yet: None removes the field
    current = ((previous or {}).get("upgrade") or {}).get("currentVersion")
    return {"stage": STAGES[component], "currentVersion": current, "targetVersion": target}
