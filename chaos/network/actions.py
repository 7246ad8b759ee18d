"""Cut and heal the links between the regions of a local cluster (``magnetar local up`` with two
or more regions puts a link proxy in front of every broker for cross-region traffic; see
``magnetar.local.link_proxy``), or of regions whose brokers are pods of this machine's
node (``magnetar chaos run --kube``: iptables rules on the node, ``magnetar.chaos.pods.links``).

A cut is a real partition of the replication traffic: replicators of the other regions stop
getting receipts from the cut region's brokers and their backlog grows; clients inside each region
keep working. Healing lets the held bytes through, and the replicators catch up.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.chaos.pods import is_kube
from magnetar.chaos.process import targets
from magnetar.local.supervisor import LocalClusterError, alive, log_end, wait_for_line

__all__ = ["heal_partition", "partition_regions"]

ROLE = "link-proxy"
#: what a link proxy prints once it has acted on a signal (magnetar.local.link_proxy)
SAID = {signal.SIGUSR1: "link cut", signal.SIGUSR2: "link healed"}
#: how long a link proxy may take to act on its signal
ACT_TIMEOUT_S = 15.0


def _links(
    cut: bool,
    regions: list[str] | None,
    from_regions: list[str] | None,
    cluster_dir: str | None,
    configuration: dict[str, Any] | None,
) -> dict[str, Any]:
    """Cut or heal: iptables rules between pods, or the link proxies' signals locally."""
    path = targets.cluster_dir(cluster_dir, configuration)
    if is_kube(path):
        from magnetar.chaos.pods import links as pod_links  # pods only: the operator's modules

        act = pod_links.cut if cut else pod_links.heal
        links = act(targets.load(path), regions, from_regions)
    else:
        links = _signal_links(path, regions, signal.SIGUSR1 if cut else signal.SIGUSR2, from_regions)
    return {"regions": regions or "all", "from_regions": from_regions or "all", "links": links,
            "at": time.time()}  # fmt: skip


def _signal_links(
    path: Path, regions: list[str] | None, sig: signal.Signals, from_regions: list[str] | None
) -> list[str]:
    links = [
        p for p in targets.load(path).processes
        if p.role == ROLE and alive(p.pid) and (not regions or p.region in regions)
        and (not from_regions or p.peer in from_regions)
    ]  # fmt: skip
    if not links:
        where = f"into {', '.join(regions)}" if regions else "between regions"
        if from_regions:
            where += f" from {', '.join(from_regions)}"
        raise ActivityFailed(
            f"no running link proxy {where} in {path}: partitions need a cluster of two or more regions"
        )
    logged = {link.name: log_end(Path(link.log)) for link in links}
    for link in links:
        os.kill(link.pid, sig)
    # A signal is handled when the proxy's event loop gets to it: the action returns once every
    # proxy has acted, so that what the experiment does next happens during the cut (or after the
    # heal), not in a race with it.
    for link in links:
        try:
            wait_for_line(Path(link.log), SAID[sig], None, ACT_TIMEOUT_S, logged[link.name], anywhere=True)
        except LocalClusterError:
            raise ActivityFailed(
                f"{link.name} did not say {SAID[sig]!r} within {ACT_TIMEOUT_S:.0f} s of {sig.name}"
            ) from None
    return [link.name for link in links]


def partition_regions(
    regions: list[str] | None = None,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
    from_regions: list[str] | None = None,
) -> dict[str, Any]:
    """Cut every link into ``regions`` (default: every region, so with two regions they are cut
    from each other). Connections stay open but carry nothing, as in a network partition; undo
    with ``heal_partition``. ``from_regions`` cuts only the traffic that comes from those
    regions (one direction of a pair: with three regions, b -> a cut while c -> a and b -> c
    flow); lookups through the front doors keep working then.

    Example::

        {"type": "action", "name": "partition",
         "provider": {"type": "python", "module": "magnetar.chaos.network.actions",
                      "func": "partition_regions"}}
        {"type": "action", "name": "cut-b-to-a",
         "provider": {"type": "python", "module": "magnetar.chaos.network.actions",
                      "func": "partition_regions",
                      "arguments": {"regions": ["a"], "from_regions": ["b"]}}}
    """
    return _links(True, regions, from_regions, cluster_dir, configuration)


def heal_partition(
    regions: list[str] | None = None,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
    from_regions: list[str] | None = None,
) -> dict[str, Any]:
    """Heal the links cut by ``partition_regions`` (default: every link; ``regions`` and
    ``from_regions`` as there); traffic held during the cut flows again, in order."""
    return _links(False, regions, from_regions, cluster_dir, configuration)
