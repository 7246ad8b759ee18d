"""Mutual TLS on the brokers' gRPC channels, with real servers in one process:
two brokers write their topics to bookies that require client certificates, and hand a bundle
over on their TLS broker RPC port; a caller without the cluster's certificate is refused there.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pulsar
import pytest
from pydantic import ValidationError

from magnetar.bookie.server import BookieServer, start_bookie
from magnetar.broker.config import BrokerConfig
from magnetar.broker.loadbalance.peers import PeerClient, PeerError
from magnetar.broker.ownership import BrokerInfo
from magnetar.broker.service import BrokerService
from magnetar.broker.topic import TopicName
from magnetar.common.tls import TlsFiles
from tests.bookie.helpers import Pki, config, make_pki

TOPIC = "persistent://public/default/over-mtls"
#: the client's own (C++) logger: a Python logger can abort the process at exit
#: (apache/pulsar-client-python#256)
_LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


def broker_settings(pki: Pki) -> dict[str, Any]:
    """One certificate per broker, for its TLS port and as a client of bookies and brokers."""
    certificate, key, ca = str(pki.broker.certificate), str(pki.broker.key), str(pki.ca)
    return {
        "bookkeeper_tls_trust_certs_file_path": ca,
        "bookkeeper_tls_client_authentication": True,
        "bookkeeper_tls_certificate_file_path": certificate,
        "bookkeeper_tls_key_file_path": key,
        "broker_client_tls_enabled": True,
        "tls_certificate_file_path": certificate,
        "tls_key_file_path": key,
        "tls_trust_certs_file_path": ca,
        "broker_client_trust_certs_file_path": ca,
        "broker_client_certificate_file_path": certificate,
        "broker_client_key_file_path": key,
    }


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
async def brokers(tmp_path: Path, memory_url: str, pki: Pki) -> AsyncIterator[list[BrokerService]]:
    bookies: list[BookieServer] = []
    services: list[BrokerService] = []
    try:
        for index in range(2):
            settings = {**pki.bookie_settings(), "auto_recovery_daemon_enabled": False}
            bookies.append(
                await start_bookie(
                    config(tmp_path / f"bookie-{index}", metadata_service_uri=memory_url, **settings)
                )
            )
        for _ in range(2):
            service = BrokerService(
                BrokerConfig(
                    metadata_store_url=memory_url,
                    broker_service_port=0,
                    web_service_port=0,
                    **broker_settings(pki),
                )
            )
            await service.start()
            services.append(service)
        yield services
    finally:
        for service in services:
            await service.stop()
        for bookie in bookies:
            await bookie.stop()


async def info(broker: BrokerService) -> BrokerInfo:
    assert broker.ownership is not None
    return next(b for b in await broker.ownership.brokers() if b.broker_id == broker.broker_id)


async def test_a_bundle_moves_between_brokers_over_mutual_tls(brokers: list[BrokerService]) -> None:
    source = brokers[0]
    assert source.bundles is not None
    assert source.ownership is not None
    namespace, bundle = await source.bundles.bundle_of(TopicName.parse(TOPIC))
    await source.bundles.lookup(TOPIC, authoritative=True)
    owner = await source.ownership.owner(namespace, bundle)
    assert owner is not None
    source = next(b for b in brokers if b.broker_id == owner.broker_id)
    destination = next(b for b in brokers if b is not source)
    assert source.bundles is not None
    assert source.ownership is not None

    client = pulsar.Client(source.service_url, operation_timeout_seconds=30, logger=_LOG)
    try:
        consumer = await asyncio.to_thread(client.subscribe, TOPIC, "s")
        producer = await asyncio.to_thread(client.create_producer, TOPIC, batching_enabled=False)
        for i in range(5):  # written to the bookies over mutual TLS
            await asyncio.to_thread(producer.send, b"before %d" % i)

        await source.bundles.transfer(namespace, bundle, destination.broker_id)
        # Owned by the destination at once: it took the bundle when called on its TLS RPC port
        # (a failed call would have fallen back to an unload, leaving the bundle unowned).
        moved = await source.ownership.owner(namespace, bundle)
        assert moved is not None
        assert moved.broker_id == destination.broker_id

        for i in range(5):  # the clients followed; the destination writes to the bookies too
            await asyncio.to_thread(producer.send, b"after %d" % i)
        received = []
        for _ in range(10):
            message = await asyncio.to_thread(consumer.receive, 10_000)
            received.append(message.data())
            await asyncio.to_thread(consumer.acknowledge, message)
        assert received == [b"before %d" % i for i in range(5)] + [b"after %d" % i for i in range(5)]
    finally:
        await asyncio.to_thread(client.close)


@pytest.mark.parametrize("caller", ["plain text", "no certificate", "another CA's certificate"])
async def test_the_broker_rpc_port_refuses_a_caller_without_the_clusters_certificate(
    brokers: list[BrokerService], pki: Pki, caller: str
) -> None:
    target = await info(brokers[1])
    tls = {
        "plain text": None,
        "no certificate": pki.client(None),
        "another CA's certificate": pki.client(pki.intruder),
    }[caller]
    peers = PeerClient(tls)
    assert brokers[1].bundles is not None
    namespace, bundle = await brokers[1].bundles.bundle_of(TopicName.parse(TOPIC))
    try:
        with pytest.raises(PeerError, match="UNAVAILABLE"):
            await peers.acquire(target, namespace, bundle, [TOPIC])
        assert brokers[1].ownership is not None
        assert await brokers[1].ownership.owner(namespace, bundle) is None, "the call took the bundle"
    finally:
        await peers.close()


def test_unusable_grpc_tls_settings_stop_the_broker_naming_them(tmp_path: Path, pki: Pki) -> None:
    settings = broker_settings(pki)
    missing = str(tmp_path / "gone.pem")
    with pytest.raises(
        ValidationError, match=re.escape(f"bookkeeper_tls_key_file_path: file not found: {missing}")
    ):
        BrokerConfig(**{**settings, "bookkeeper_tls_key_file_path": missing})
    with pytest.raises(ValidationError, match="needs broker_client_certificate_file_path"):
        BrokerConfig(**{**settings, "broker_client_certificate_file_path": ""})
    with pytest.raises(ValidationError, match="bookkeeper_tls_trust_certs_file_path is set"):
        BrokerConfig(**{**settings, "bookkeeper_tls_trust_certs_file_path": ""})
    config_ = BrokerConfig(**settings)
    assert config_.ledger_client().tls == TlsFiles(
        str(pki.broker.certificate), str(pki.broker.key), str(pki.ca)
    )
    assert BrokerConfig().ledger_client().tls is None
    assert BrokerConfig().broker_client_tls() is None
