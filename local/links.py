"""The links between the regions of a local cluster, laid out so the chaos lab can cut them.

With two or more regions every cross-region connection goes through a link proxy
(``magnetar local link-proxy``), never straight to a broker:

- each region has a *front door*, a proxy in front of all its writable brokers; the region is
  registered in the configuration store with the front door as its ``brokerServiceUrl``, as a
  load balancer or DNS name would be in a real deployment;
- each writable broker advertises one listener (Pulsar's ``advertisedListeners``) per other
  region, ``replication-from-<region>``, whose address is a proxy in front of it that carries
  only that region's traffic; each broker's replicators look remote brokers up under their own
  region's name (``replication_outbound_listener_name``), so a lookup answered through the front
  door redirects to the proxy of that pair of regions, not to the broker. Every pair of regions,
  in each direction, is its own link: one can be cut or slowed while the others flow (PIP-33's
  race of a message from b reaching c before a needs exactly that).

With TLS (``security: {tls: true}``) every link has a second proxy beside it for the
``pulsar+ssl://`` traffic (the same listener name advertises both URLs, as Pulsar's
``advertisedListeners`` do, and the front door has a TLS twin registered as the cluster's
``brokerServiceUrlTls``); the proxies move the encrypted bytes as they are.

Clients inside a region use the brokers' own service URLs and are never cut.
``magnetar.chaos.network.actions.partition_regions`` signals the proxies of a region to cut.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from magnetar.common.ports import free_port

#: the listener name of cross-region traffic
LISTENER = "replication"
ROLE = "link-proxy"


def front_door(regions: dict[str, dict[str, str]], region: str, *, tls: bool = False) -> str:
    """host:port of ``region``'s front door (its TLS one with ``tls``), chosen once and kept in
    the cluster state."""
    info = regions[region]
    key = "front_door_tls" if tls else "front_door"
    if key not in info:
        info[key] = f"127.0.0.1:{free_port()}"
    return info[key]


def listener_name(source: str) -> str:
    """The listener a broker advertises for the traffic that comes from region ``source``."""
    return f"{LISTENER}-from-{source}"


def broker_settings(
    regions: dict[str, dict[str, str]], region: str, peers: list[str], *, tls: bool = False
) -> dict[str, Any]:
    """The settings that route a writable broker's cross-region traffic through link proxies:
    a listener per region ``peers`` (the other regions) and its own region's name for lookups
    its replicators make; with ``tls`` each listener has a pulsar+ssl:// address too."""
    schemes = ("pulsar", "pulsar+ssl") if tls else ("pulsar",)
    settings: dict[str, Any] = {
        "advertised_listeners": ",".join(
            f"{listener_name(peer)}:{scheme}://127.0.0.1:{free_port()}"
            for peer in peers
            for scheme in schemes
        ),
        "replication_outbound_listener_name": listener_name(region),
        "cluster_broker_service_url": f"pulsar://{front_door(regions, region)}",
    }
    if tls:
        settings["cluster_broker_service_url_tls"] = f"pulsar+ssl://{front_door(regions, region, tls=True)}"
    return settings


def listener_addresses(config_file: Path, *, tls: bool = False) -> dict[str, str]:
    """Region -> host:port of the listener for that region's traffic (its pulsar+ssl:// one with
    ``tls``), from a broker's configuration file."""
    config = yaml.safe_load(config_file.read_text())
    found = {}
    prefix = listener_name("")
    scheme = "pulsar+ssl://" if tls else "pulsar://"
    for listener in str(config.get("advertised_listeners", "")).split(","):
        name, _, url = listener.partition(":")
        url = url.strip()
        if name.strip().startswith(prefix) and url.startswith(scheme):
            found[name.strip()[len(prefix) :]] = url.removeprefix(scheme)
    return found


def proxy_arguments(listen: str, targets: list[str]) -> list[str]:
    """``magnetar`` arguments of a link proxy."""
    return ["local", "link-proxy", "--listen", listen, *[a for t in targets for a in ("--target", t)]]
