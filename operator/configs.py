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
from magnetar.operator import cluster_secrets
from magnetar.operator.resources import ClusterSpec

BOOKIE_PORT = 3181
BOOKIE_METRICS_PORT = 8000
BROKER_PORT = 6650
BROKER_WEB_PORT = 8080
BROKER_TLS_PORT = 6651
BROKER_WEB_TLS_PORT = 8443
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
    return settings | bookie_security(spec)


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
    return settings | broker_security(spec)


# The security settings name the files the pods mount (cluster_secrets.py), never a secret's value. They
# are added after the components' models checked the rest: those models read the files, which
# exist in the pods, not here (tests check them against real files).
def _tls_files(prefix: str, *, pulsar_names: bool = True) -> dict[str, str]:
    """``<prefix>certificate_file_path`` etc. (the bookie's: ``certificate_path``, ``key_path``,
    ``trust_store_path``) naming the mounted ``tls.crt``, ``tls.key`` and ``ca.crt``."""
    names = (
        ("certificate_file_path", "key_file_path", "trust_certs_file_path")
        if pulsar_names
        else ("certificate_path", "key_path", "trust_store_path")
    )
    files = (f"{cluster_secrets.TLS_DIR}/{k}" for k in cluster_secrets.TLS_KEYS)
    return {f"{prefix}{n}": f for n, f in zip(names, files, strict=True)}


def bookie_security(spec: ClusterSpec) -> dict[str, Any]:
    if not spec.tls.enabled:
        return {}
    return {
        **_tls_files("tls_", pulsar_names=False),
        "tls_client_authentication": True,
    }


def broker_security(spec: ClusterSpec) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if spec.auth.enabled:
        roles = [cluster_secrets.OPERATOR_ROLE, cluster_secrets.BROKER_ROLE, *spec.auth.super_user_roles]
        settings |= {
            "authentication_enabled": True,
            "authentication_providers": "token",
            "token_secret_key": f"file://{cluster_secrets.TOKEN_KEY_DIR}/{cluster_secrets.TOKEN_KEY_FILE}",
            "authorization_enabled": True,
            "super_user_roles": ",".join(dict.fromkeys(roles)),
            "broker_client_authentication_plugin": "token",
            "broker_client_authentication_parameters": f"file://{cluster_secrets.TOKEN_DIR}/{cluster_secrets.TOKEN_FILE}",
        }
    if spec.tls.enabled:
        settings |= {
            "broker_service_port_tls": BROKER_TLS_PORT,
            "web_service_port_tls": BROKER_WEB_TLS_PORT,
            **_tls_files("tls_"),
            # to the bookies, which require client certificates
            **_tls_files("bookkeeper_tls_"),
            "bookkeeper_tls_client_authentication": True,
            # the broker RPCs (bundle transfers, cursors), mutual TLS both ways
            "broker_client_tls_enabled": True,
            **_tls_files("broker_client_"),
        }
    return settings


def reserved(spec: ClusterSpec) -> dict[str, set[str]]:
    """Per component (as in the spec), the settings the operator sets from spec.auth/spec.tls."""
    return {"bookies": set(bookie_security(spec)), "brokers": set(broker_security(spec))}


def to_yaml(settings: dict[str, Any]) -> str:
    return yaml.safe_dump(settings, sort_keys=True)
