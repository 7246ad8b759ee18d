"""The links between the regions of a local cluster, laid out so the chaos lab can cut them.

With two or more regions every cross-region connection goes through a link proxy
(``magnetar local link-proxy``), never straight to a broker:

- each region has a *front door*, a proxy in front of all its writable brokers; the region is
  registered in the configuration store with the front door as its ``brokerServiceUrl``, as a
  load balancer or DNS name would be in a real deployment;
- each writable broker advertises a ``replication`` listener (Pulsar's ``advertisedListeners``)
  whose address is a proxy in front of it, and the cluster's ``listenerName`` makes the other
  regions' replicators look brokers up under that name, so a lookup answered through the front
  door redirects to the broker's proxy, not to the broker.

Clients inside a region use the brokers' own service URLs and are never cut.
``magnetar.chaos.network.actions.partition_regions`` signals the proxies of a region to cut.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from magnetar.common.zkserver import free_port

#: the listener name of cross-region traffic
LISTENER = "replication"
ROLE = "link-proxy"


def front_door(regions: dict[str, dict[str, str]], region: str) -> str:
    """host:port of ``region``'s front door, chosen once and kept in the cluster state."""
    info = regions[region]
    if "front_door" not in info:
        info["front_door"] = f"127.0.0.1:{free_port()}"
    return info["front_door"]


def broker_settings(regions: dict[str, dict[str, str]], region: str) -> dict[str, Any]:
    """The settings that route a writable broker's cross-region traffic through link proxies."""
    return {
        "advertised_listeners": f"{LISTENER}:pulsar://127.0.0.1:{free_port()}",
        "replication_listener_name": LISTENER,
        "cluster_broker_service_url": f"pulsar://{front_door(regions, region)}",
    }


def listener_address(config_file: Path) -> str:
    """host:port of the ``replication`` listener in a broker's configuration file."""
    config = yaml.safe_load(config_file.read_text())
    for listener in str(config.get("advertised_listeners", "")).split(","):
        name, _, url = listener.partition(":")
        if name.strip() == LISTENER:
            return url.strip().removeprefix("pulsar://")
    raise ValueError(f"{config_file} advertises no {LISTENER!r} listener")


def proxy_arguments(listen: str, targets: list[str]) -> list[str]:
    """``magnetar`` arguments of a link proxy."""
    return ["local", "link-proxy", "--listen", listen, *[a for t in targets for a in ("--target", t)]]
