"""Geo-replication between secured regions (the supervisor's ``security: {tokens: true, tls:
true}``): every broker requires a token (no anonymous role), the replicators prove themselves
with the broker's own credentials and reach the other region over pulsar+ssl:// through the TLS
link proxies. Proof that the credentials are what lets them in: with a forged broker-client
token on east, nothing replicates and the replicator says the remote refused it."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest
import yaml

from magnetar.admin.client import AdminClient, AdminError
from magnetar.common.authentication import keys, tokens
from magnetar.local.spec import ClusterSpec, SecuritySpec
from magnetar.local.supervisor import alive
from tests.broker.geo.conftest import REGIONS, Regions, region_spec
from tests.broker.geo.test_replication import receive_all

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Regions]:
    started = Regions(tmp_path_factory.mktemp("geo-secured") / "cluster")
    spec = ClusterSpec(
        name="geo-secured",
        regions=[region_spec(r) for r in REGIONS],
        security=SecuritySpec(tokens=True, tls=True),
    )
    started.supervisor.up(spec)
    yield started
    started.supervisor.down()


def replication_of(regions: Regions, region: str, topic: str, remote: str) -> dict[str, Any]:
    stats: dict[str, Any] = regions.stats(region, topic)["replication"][remote]
    return stats


def wait_for(condition: Any, timeout_s: float = 30, what: str = "") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout_s}s: {what}")


def test_replicates_over_tls_with_the_brokers_token(secured: Regions) -> None:
    namespace = secured.replicated_namespace("acme/secured")
    topic = f"persistent://{namespace}/orders"
    east, west = secured.client("east"), secured.client("west")
    try:
        consumer = west.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = east.create_producer(topic)
        sent = [f"m{i}" for i in range(200)]
        for text in sent:
            producer.send_async(text.encode(), None)
        producer.flush()
        assert receive_all(consumer, len(sent)) == sent
    finally:
        east.close()
        west.close()
    # The replicator's session is on the TLS link into west: pulsar+ssl://, authenticated.
    stats = replication_of(secured, "east", topic, "west")
    assert stats["connected"], stats
    assert stats["outboundConnection"].startswith("pulsar+ssl://"), stats
    assert stats["lastError"] == ""
    west_cluster = secured.call("east", "GET", "/admin/v2/clusters/west")
    assert west_cluster["brokerServiceUrlTls"].startswith("pulsar+ssl://")
    assert west_cluster["serviceUrlTls"].startswith("https://")


@pytest.mark.parametrize("region", REGIONS)
def test_anonymous_clients_are_refused(secured: Regions, region: str) -> None:
    client = pulsar.Client(secured.service_url(region), operation_timeout_seconds=3)
    try:
        # the official client retries a refused CONNECT until its operation timeout
        with pytest.raises(pulsar.PulsarException):
            client.create_producer("persistent://public/default/anonymous")
    finally:
        client.close()
    assert "authentication failed" in Path(secured.broker(region).log).read_text()
    with pytest.raises(AdminError) as refused:
        AdminClient(secured.broker(region).endpoints["web_service_url"]).call("GET", "/admin/v2/tenants")
    assert refused.value.status == 401


def _restart_with(regions: Regions, region: str, settings: dict[str, Any]) -> None:
    """Restart the region's broker with ``settings`` written into its configuration file."""
    broker = regions.broker(region)
    config_file = Path(regions.directory) / f"{broker.name}.yaml"
    config = yaml.safe_load(config_file.read_text())
    config_file.write_text(yaml.safe_dump({**config, **settings}))
    os.kill(broker.pid, signal.SIGTERM)
    wait_for(lambda: not alive(broker.pid), what=f"{broker.name} stopped")
    regions.supervisor.restart(broker.name)


def test_forged_broker_credentials_replicate_nothing(secured: Regions) -> None:
    """The replication above works only because the replicator authenticates: east's broker
    with a token signed by another key is refused by west, says so, and sends nothing; with its
    real token back, what waited is replicated."""
    config_file = Path(secured.directory) / f"{secured.broker('east').name}.yaml"
    genuine = yaml.safe_load(config_file.read_text())["broker_client_authentication_parameters"]
    forged = tokens.create(keys.new_secret_key(), "admin")
    namespace = secured.replicated_namespace("acme/forged")
    topic = f"persistent://{namespace}/orders"
    _restart_with(secured, "east", {"broker_client_authentication_parameters": f"token:{forged}"})
    try:
        east = secured.client("east")
        try:
            producer = east.create_producer(topic)
            for i in range(20):
                producer.send(f"f{i}".encode())
        finally:
            east.close()
        stats = wait_for(
            lambda: (s := replication_of(secured, "east", topic, "west"))["lastError"] and s,
            what="the replicator reports the refusal",
        )
        assert "remote cluster west refused the replicator's credentials" in stats["lastError"], stats
        assert "AuthenticationError" in stats["lastError"]
        assert not stats["connected"], stats
        assert stats["replicationBacklog"] == 20, stats
        log = Path(secured.broker("east").log).read_text()
        assert "remote cluster west refused the replicator's credentials" in log
        assert topic not in secured.call("west", "GET", f"/admin/v2/persistent/{namespace}"), (
            "nothing reached west"
        )
    finally:
        _restart_with(secured, "east", {"broker_client_authentication_parameters": genuine})
    east, west = secured.client("east"), secured.client("west")
    try:
        east.create_producer(topic)  # loads the topic in east again, and so its replicator
        consumer = west.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        assert receive_all(consumer, 20) == [f"f{i}" for i in range(20)]
    finally:
        east.close()
        west.close()
