"""The configuration files the pods load, rendered from the typed component configs.

Each is validated by the component's own pydantic model (``BookieConfig``, ``BrokerConfig``) before
it reaches a ConfigMap, so a bad setting is an error on the resource, not a crash-looping pod.
Per-pod values (the advertised address, the rack) come from the environment the entrypoint sets.
"""

from __future__ import annotations

from typing import Any

import yaml

from magnetar.bookie.config import BookieConfig
from magnetar.broker.config import BrokerConfig
from magnetar.operator.resources import ClusterSpec

BOOKIE_PORT = 3181
BOOKIE_METRICS_PORT = 8000
BROKER_PORT = 6650
BROKER_WEB_PORT = 8080
ZOOKEEPER_PORT = 2181
DATA = "/var/lib/magnetar"


def metadata_url(spec: ClusterSpec, name: str, namespace: str) -> str:
    """The region's metadata store: the external URL, or the ZooKeeper the operator runs."""
    if spec.metadata_store.url:
        return spec.metadata_store.url
    return f"zk://{name}-zookeeper.{namespace}.svc:{ZOOKEEPER_PORT}/magnetar/{spec.region(name)}"


def bookie_settings(spec: ClusterSpec, name: str, namespace: str) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bookie_port": BOOKIE_PORT,
        "listen_address": "0.0.0.0",
        "journal_directory": f"{DATA}/journal",
        "ledger_directories": [f"{DATA}/ledgers"],
        "metadata_service_uri": metadata_url(spec, name, namespace),
        "prometheus_stats_http_port": BOOKIE_METRICS_PORT,
        **spec.bookies.config,
    }
    BookieConfig.model_validate(settings)
    return settings


def broker_settings(spec: ClusterSpec, name: str, namespace: str) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "cluster_name": spec.region(name),
        "metadata_store_url": metadata_url(spec, name, namespace),
        "bind_address": "0.0.0.0",
        "broker_service_port": BROKER_PORT,
        "web_service_port": BROKER_WEB_PORT,
        "managed_ledger_default_ensemble_size": spec.bookies.ensemble_size,
        "managed_ledger_default_write_quorum": spec.bookies.write_quorum,
        "managed_ledger_default_ack_quorum": spec.bookies.ack_quorum,
        **spec.brokers.config,
    }
    if spec.configuration_store.url:
        settings["configuration_metadata_store_url"] = spec.configuration_store.url
    BrokerConfig.model_validate(settings)
    return settings


def to_yaml(settings: dict[str, Any]) -> str:
    return yaml.safe_dump(settings, sort_keys=True)
