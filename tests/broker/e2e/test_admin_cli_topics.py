"""``magnetar admin topics`` in pulsar-admin's shapes against a real standalone: what
each command does is checked with the official client."""

from __future__ import annotations

import itertools
import json

import pulsar
from click.testing import CliRunner

from magnetar.admin.cli import admin
from tests.broker.e2e.conftest import Standalone

TOPIC = "persistent://public/default/cli"


def test_topic_commands_do_what_pulsar_admin_does(standalone: Standalone) -> None:
    def cli(*args: str, ok: bool = True) -> str:
        result = CliRunner().invoke(admin, ["--admin-url", standalone.web_service_url, *args])
        assert (result.exit_code == 0) is ok, result.output
        return result.output

    cli("topics", "create-partitioned-topic", "persistent://public/default/wide", "-p", "8")
    assert '"partitions": 8' in cli(
        "topics", "get-partitioned-topic-metadata", "persistent://public/default/wide"
    )
    assert "HTTP 409" in cli("topics", "create", "persistent://public/default/wide", ok=False)
    assert "persistent://public/default/wide" in cli("topics", "list-partitioned-topics", "public/default")

    cli("topics", "create", TOPIC)
    low, high = cli("topics", "bundle-range", TOPIC).strip().strip('"').split("_")
    boundaries = json.loads(cli("namespaces", "bundles", "public/default"))["boundaries"]
    assert (low, high) in itertools.pairwise(boundaries)  # one of the namespace's bundles
    cli("topics", "create-subscription", TOPIC, "-s", "audit", "-m", "earliest")
    client = standalone.client()
    producer = client.create_producer(TOPIC, batching_enabled=False)
    ids = [producer.send(f"order-{i}".encode(), properties={"n": str(i)}) for i in range(4)]

    peeked = cli("topics", "peek-messages", TOPIC, "-s", "audit", "-n", "2")
    assert "order-0" in peeked
    assert "order-1" in peeked
    assert "order-2" not in peeked
    assert f"Message ID: {ids[0].ledger_id()}:{ids[0].entry_id()}" in peeked
    cli("topics", "skip", TOPIC, "-s", "audit", "-n", "3")
    assert "order-3" in cli("topics", "peek-messages", TOPIC, "-s", "audit")
    cli("topics", "reset-cursor", TOPIC, "-s", "audit", "-t", "1h")
    assert "order-0" in cli("topics", "peek-messages", TOPIC, "-s", "audit")
    cli("topics", "reset-cursor", TOPIC, "-s", "audit", "-m", f"{ids[2].ledger_id()}:{ids[2].entry_id()}")
    assert "order-2" in cli("topics", "peek-messages", TOPIC, "-s", "audit")
    assert "order-3" in cli("topics", "examine-message", TOPIC)
    assert "order-0" in cli("topics", "examine-message", TOPIC, "-i", "earliest")
    cli("topics", "expire-messages", TOPIC, "-s", "audit", "-t", "0s")
    assert "HTTP 404" in cli("topics", "peek-messages", TOPIC, "-s", "audit", ok=False)
    assert "expected a duration" in cli(
        "topics", "expire-messages", TOPIC, "-s", "audit", "-t", "soon", ok=False
    )

    assert f'"entryId": {ids[3].entry_id()}' in cli("topics", "terminate", TOPIC)
    try:
        producer.send(b"late")
        raise AssertionError("a terminated topic took a message")
    except pulsar.TopicTerminated:
        pass
    client.subscribe(TOPIC, "watcher")
    assert "HTTP 412" in cli("topics", "delete", TOPIC, ok=False)  # a consumer is attached
    # As in Pulsar, a consumer that reconnects after the forced delete would create the topic
    # again if clients may create topics: not in this namespace while it is deleted.
    cli("namespaces", "set-auto-topic-creation", "public/default", "--disable")
    cli("topics", "delete", TOPIC, "--force")
    assert TOPIC not in cli("topics", "list", "public/default")
    cli("namespaces", "remove-auto-topic-creation", "public/default")
    cli("topics", "delete-partitioned-topic", "persistent://public/default/wide")
    assert "wide" not in cli("topics", "list-partitioned-topics", "public/default")
    client.close()


def test_policy_commands_take_pulsar_admin_sizes_and_times(standalone: Standalone) -> None:
    def cli(*args: str, ok: bool = True) -> str:
        result = CliRunner().invoke(admin, ["--admin-url", standalone.web_service_url, *args])
        assert (result.exit_code == 0) is ok, result.output
        return result.output

    cli("namespaces", "set-retention", "public/default", "--size", "1G", "--time", "3d")
    shown = cli("namespaces", "get-retention", "public/default")
    assert '"retentionTimeInMinutes": 4320' in shown
    assert '"retentionSizeInMB": 1024' in shown
    cli("topics", "create", TOPIC)
    cli("topics", "set-message-ttl", TOPIC, "-t", "1h")
    assert cli("topics", "get-message-ttl", TOPIC).strip() == "3600"
    assert '"retentionTimeInMinutes": 4320' in cli("topics", "get-retention", TOPIC, "--applied")
    cli("topics", "set-backlog-quota", TOPIC, "-l", "10M", "-p", "producer_exception")
    assert '"limitSize": 10485760' in cli("topics", "get-backlog-quotas", TOPIC)
    cli("topics", "set-delayed-delivery", TOPIC, "-d")
    assert '"active": false' in cli("topics", "get-delayed-delivery", TOPIC)
    cli("topics", "remove-message-ttl", TOPIC)
    assert cli("topics", "get-message-ttl", TOPIC).strip() == ""
    assert "expected a size" in cli(
        "namespaces", "set-retention", "public/default", "-s", "lots", "-t", "1d", ok=False
    )
    assert "HTTP 412" in cli("topics", "set-max-producers", TOPIC, "-p", "-3", ok=False)

    cli("namespaces", "set-auto-topic-creation", "public/default", "-e", "-t", "partitioned", "-n", "2")
    assert '"defaultNumPartitions": 2' in cli("namespaces", "get-auto-topic-creation", "public/default")
    client = standalone.client()
    client.create_producer("persistent://public/default/auto").send(b"x")
    assert '"partitions": 2' in cli(
        "topics", "get-partitioned-topic-metadata", "persistent://public/default/auto"
    )
    cli("namespaces", "remove-auto-topic-creation", "public/default")
    assert cli("namespaces", "get-auto-topic-creation", "public/default").strip() == ""
    client.close()
