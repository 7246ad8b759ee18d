"""The chaos lab: a Chaos Toolkit extension for Magnetar (and Apache Pulsar) clusters.

Activities are laid out as in chaostoolkit-kubernetes, one folder per kind of target:

- ``magnetar.chaos.process.actions`` / ``probes``: faults on the processes of a local cluster
  (``magnetar local up``): kill, stop, start, freeze and thaw bookies and brokers, region outages.
- ``magnetar.chaos.storage.probes``: registered bookies, under-replicated ledgers, and a wait
  for auto-recovery to finish.
- ``magnetar.chaos.bundles.actions``: unload and transfer bundles through the admin REST API.
- ``magnetar.chaos.network.actions``: cut and heal the links between regions (partitions).
- ``magnetar.chaos.topics.probes``: subscription backlogs, and a wait for consumers to catch up.
- ``magnetar.chaos.geo.actions``: replicated namespaces, and consumers moved between regions.
- ``magnetar.chaos.workload.actions`` / ``probes``: the background workload and its event log.
- ``magnetar.chaos.pods.actions``: faults only pods have (a pod deleted and made again); with
  ``magnetar chaos run --kube`` every other activity acts on pods too (containers killed and
  frozen through their host PIDs, links between regions' pods cut with iptables).

Experiments name them as Python providers, e.g.::

    {"type": "action", "name": "kill-a-bookie",
     "provider": {"type": "python", "module": "magnetar.chaos.process.actions",
                  "func": "kill_bookie", "arguments": {"region": "jp-east"}}}

Every activity finds the cluster through its ``cluster_dir`` argument, else the experiment's
configuration key ``magnetar_cluster_dir``, else ``MAGNETAR_CLUSTER_DIR``, else
``runs/latest-cluster`` (what the last ``magnetar local up`` started); the run's directory (event
log, workload logs) through ``magnetar_run_dir``, else ``MAGNETAR_RUN_DIR``, else a fresh
``runs/chaos-<time>/`` per process (``workload.rundir``). Every experiment of
``chaos/experiments/`` declares these keys in its ``configuration`` block with environment
defaults, so the stock ``chaos run`` works (``--var magnetar_run_dir=...``) as well as
``magnetar chaos run``, which sets them and adds the cluster's logs and the post-mortem.

``chaos discover magnetar --no-install`` lists every activity module: Chaos Toolkit imports the
distribution's top-level package ``magnetar``, whose ``discover`` is this module's. Without
``--no-install`` it first runs ``pip install -U magnetar`` against the package index, which does
not serve this checkout. (``chaos discover magnetar.chaos`` cannot work: Chaos Toolkit looks the
name up as an installed distribution, and ``magnetar`` is the only one.)
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

__version__ = "0.1.0"

#: the modules that hold activities, in every kind's folder: ``<kind>.actions`` and ``<kind>.probes``
ACTIVITY_MODULES = ("actions", "probes")


def activity_modules() -> list[str]:
    """Every activity module of the lab (``magnetar.chaos.<kind>.actions`` / ``.probes``),
    found in the package's folders, so a new one is never left out of the discovery."""
    found = []
    for kind in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        if kind.ispkg:
            package = importlib.import_module(kind.name)
            found += [
                f"{kind.name}.{module.name}"
                for module in pkgutil.iter_modules(package.__path__)
                if module.name in ACTIVITY_MODULES
            ]
    return sorted(found)


def discover(discover_system: bool = True) -> dict[str, Any]:
    """What this extension offers, for ``chaos discover magnetar``: every activity of every
    activity module; with ``discover_system``, the local cluster the activities would act on
    (``system``: None when there is none)."""
    from chaoslib.discovery.discover import discover_actions, discover_probes, initialize_discovery_result

    discovery: dict[str, Any] = initialize_discovery_result("magnetar", __version__, "magnetar")
    for module in activity_modules():
        found = discover_actions(module) if module.endswith(".actions") else discover_probes(module)
        discovery["activities"].extend(found)
    if discover_system:
        discovery["system"] = _local_cluster()
    return discovery


def _local_cluster() -> dict[str, Any] | None:
    """The local cluster that ``MAGNETAR_CLUSTER_DIR`` or ``runs/latest-cluster`` names, if any."""
    from chaoslib.exceptions import ActivityFailed

    from magnetar.chaos.process import targets
    from magnetar.local.supervisor import alive

    try:
        state = targets.load(targets.cluster_dir(None, None))
    except ActivityFailed:
        return None
    return {
        "cluster_dir": state.directory,
        "name": state.name,
        "regions": state.regions,
        "processes": [
            {"name": p.name, "role": p.role, "region": p.region, "running": alive(p.pid)}
            for p in state.processes
        ],
    }
