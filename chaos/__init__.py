"""The chaos lab: a Chaos Toolkit extension for Magnetar (and Apache Pulsar) clusters.

Activities are laid out as in chaostoolkit-kubernetes, one folder per kind of target:

- ``magnetar.chaos.process.actions`` / ``probes``: faults on the processes of a local cluster
  (``magnetar local up``): kill, stop, start, freeze and thaw bookies and brokers, region outages.
- ``magnetar.chaos.storage.probes``: registered bookies, under-replicated ledgers, and a wait
  for auto-recovery to finish.
- ``magnetar.chaos.bundles.actions``: unload and transfer bundles through the admin REST API.
- ``magnetar.chaos.network.actions``: cut and heal the links between regions (partitions).
- ``magnetar.chaos.topics.probes``: subscription backlogs, and a wait for consumers to catch up.
- ``magnetar.chaos.workload.actions`` / ``probes``: the background workload and its event log.

Experiments name them as Python providers, e.g.::

    {"type": "action", "name": "kill-a-bookie",
     "provider": {"type": "python", "module": "magnetar.chaos.process.actions",
                  "func": "kill_bookie", "arguments": {"region": "jp-east"}}}

Every activity finds the cluster through its ``cluster_dir`` argument, else the experiment's
configuration key ``magnetar_cluster_dir``, else ``MAGNETAR_CLUSTER_DIR``, else
``runs/latest-cluster`` (what the last ``magnetar local up`` started).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def discover(discover_system: bool = True) -> dict[str, Any]:
    """What this extension offers, for ``chaos discover magnetar``."""
    from chaoslib.discovery.discover import discover_actions, discover_probes, initialize_discovery_result

    discovery: dict[str, Any] = initialize_discovery_result("magnetar", __version__, "magnetar")
    discovery["activities"].extend(discover_actions("magnetar.chaos.process.actions"))
    discovery["activities"].extend(discover_probes("magnetar.chaos.process.probes"))
    discovery["activities"].extend(discover_probes("magnetar.chaos.storage.probes"))
    discovery["activities"].extend(discover_actions("magnetar.chaos.bundles.actions"))
    discovery["activities"].extend(discover_probes("magnetar.chaos.topics.probes"))
    discovery["activities"].extend(discover_actions("magnetar.chaos.network.actions"))
    discovery["activities"].extend(discover_actions("magnetar.chaos.workload.actions"))
    discovery["activities"].extend(discover_probes("magnetar.chaos.workload.probes"))
    return discovery
