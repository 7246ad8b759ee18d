"""Topic compaction with the official client: read_compacted consumers and readers see
the latest value of each key (an empty value deletes it) and then the tail; other subscriptions
see everything; the compacted view survives a restart and an unload; the client's table view
reads it; a topic without keys is refused with the reason; a topic over its compactionThreshold is
compacted by itself."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pulsar
import pytest
from click.testing import CliRunner

from magnetar.admin.cli import admin
from tests.broker.e2e.conftest import Standalone

TOPIC = "persistent://public/default/compaction-"


def _url(standalone: Standalone, local: str) -> str:
    return f"{standalone.web_service_url}/admin/v2/persistent/public/default/{local}/compaction"


def _compact_status(standalone: Standalone, local: str) -> dict[str, str]:
    with urllib.request.urlopen(_url(standalone, local), timeout=10) as response:
        status: dict[str, str] = json.load(response)
    return status


def _compact(standalone: Standalone, local: str) -> dict[str, str]:
    urllib.request.urlopen(urllib.request.Request(_url(standalone, local), method="PUT"), timeout=10).close()
    deadline = time.monotonic() + 30
    while True:
        status = _compact_status(standalone, local)
        if status["status"] != "RUNNING" or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


def _read_compacted(client: pulsar.Client, topic: str) -> list[tuple[str, bytes]]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got = []
    while reader.has_message_available():
        message = reader.read_next(5000)
        got.append((message.partition_key(), message.data()))
    reader.close()
    return got


def _publish_history(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for key, value in [("a", b"a1"), ("b", b"b1"), ("a", b"a2"), ("c", b"c1"), ("b", b""), ("c", b"c2")]:
        producer.send(value, partition_key=key)
    producer.close()


def test_read_compacted_sees_the_latest_value_per_key_then_the_tail(standalone: Standalone) -> None:
    topic = TOPIC + "latest"
    client = standalone.client()
    client.subscribe(topic, "compacted", is_read_compacted=True).close()
    everything = client.subscribe(topic, "everything")
    _publish_history(client, topic)
    assert _compact(standalone, "compaction-latest") == {"status": "SUCCESS", "lastError": ""}
    assert _read_compacted(client, topic) == [("a", b"a2"), ("c", b"c2")]  # b was deleted
    compacted = client.subscribe(topic, "compacted", is_read_compacted=True)
    assert [compacted.receive(5000).data() for _ in range(2)] == [b"a2", b"c2"]
    client.create_producer(topic).send(b"a3", partition_key="a")  # after the horizon: the tail
    assert compacted.receive(5000).data() == b"a3"
    assert [everything.receive(5000).data() for _ in range(7)] == [
        b"a1",
        b"b1",
        b"a2",
        b"c1",
        b"",
        b"c2",
        b"a3",
    ]
    table = client.create_table_view(topic)
    deadline = time.monotonic() + 10
    while table.get("a") != b"a3" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (table.get("a"), table.get("b"), table.get("c")) == (b"a3", None, b"c2")
    client.close()


def test_the_compacted_view_survives_a_restart_and_an_unload(standalone: Standalone) -> None:
    topic = TOPIC + "durable"
    client = standalone.client()
    _publish_history(client, topic)
    assert _compact(standalone, "compaction-durable")["status"] == "SUCCESS"
    client.close()
    standalone.restart()
    client = standalone.client()
    assert _read_compacted(client, topic) == [("a", b"a2"), ("c", b"c2")]
    unload = f"{standalone.web_service_url}/admin/v2/persistent/public/default/compaction-durable/unload"
    urllib.request.urlopen(urllib.request.Request(unload, method="PUT"), timeout=10).close()
    assert _read_compacted(client, topic) == [("a", b"a2"), ("c", b"c2")]
    # compacted again after more messages: the new view replaces the old
    client.create_producer(topic).send(b"", partition_key="a")
    assert _compact(standalone, "compaction-durable")["status"] == "SUCCESS"
    assert _read_compacted(client, topic) == [("c", b"c2")]
    client.close()


def test_compaction_refuses_a_topic_without_keys(standalone: Standalone) -> None:
    topic = TOPIC + "keyless"
    client = standalone.client()
    client.create_producer(topic).send(b"no key")
    status = _compact(standalone, "compaction-keyless")
    assert status["status"] == "ERROR"
    assert "no message with a key" in status["lastError"]
    assert _read_compacted(client, topic) == [("", b"no key")]  # nothing was compacted
    client.close()


def test_magnetar_admin_compacts_and_waits_for_the_result(standalone: Standalone) -> None:
    topic = TOPIC + "cli"
    client = standalone.client()
    _publish_history(client, topic)
    client.close()
    runner = CliRunner()
    base = ["--admin-url", standalone.web_service_url, "topics"]
    assert runner.invoke(admin, [*base, "compaction-status", topic]).output.count("NOT_RUN") == 1
    assert runner.invoke(admin, [*base, "compact", topic]).exit_code == 0
    result = runner.invoke(admin, [*base, "compaction-status", topic, "--wait-complete"])
    assert '"status": "SUCCESS"' in result.output


def test_a_topic_over_its_compaction_threshold_is_compacted_by_itself(tmp_path: Path) -> None:
    server = Standalone(tmp_path / "standalone", broker_service_compaction_monitor_interval_in_seconds=0.5)
    server.start()
    try:
        runner = CliRunner()
        namespace_command = ["--admin-url", server.web_service_url, "namespaces"]
        set_threshold = [*namespace_command, "set-compaction-threshold", "public/default", "-t", "100"]
        assert runner.invoke(admin, set_threshold).exit_code == 0
        client = server.client()
        topic = TOPIC + "threshold"
        _publish_history(client, topic)  # a few hundred bytes: over the threshold
        deadline = time.monotonic() + 30
        while _compact_status(server, "compaction-threshold")["status"] != "SUCCESS":
            assert time.monotonic() < deadline, "the topic was not compacted by itself"
            time.sleep(0.2)
        assert _read_compacted(client, topic) == [("a", b"a2"), ("c", b"c2")]
        client.close()
    finally:
        server.stop()
        server.kill()


def test_of_a_batch_only_the_latest_values_are_read_compacted(standalone: Standalone) -> None:
    topic = TOPIC + "batched"
    client = standalone.client()
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                                      batching_max_publish_delay_ms=1000)  # fmt: skip
    for round_ in range(3):  # one batch: three values of each key, then "k1" deleted
        for key in ("k0", "k1", "k2"):
            producer.send_async(f"{key}-{round_}".encode(), None, partition_key=key)
    producer.send_async(b"", None, partition_key="k1")
    producer.flush()
    stats = json.load(
        urllib.request.urlopen(
            f"{standalone.web_service_url}/admin/v2/persistent/public/default/"
            "compaction-batched/internalStats",
            timeout=10,
        )
    )
    assert stats["numberOfEntries"] == 1, "the messages were meant to go in one batch"
    assert _compact(standalone, "compaction-batched")["status"] == "SUCCESS"
    assert _read_compacted(client, topic) == [("k0", b"k0-2"), ("k2", b"k2-2")]
    consumer = client.subscribe(topic, "compacted", is_read_compacted=True,
                                initial_position=pulsar.InitialPosition.Earliest)  # fmt: skip
    got = [consumer.receive(5000) for _ in range(2)]
    assert [m.data() for m in got] == [b"k0-2", b"k2-2"]
    for message in got:
        consumer.acknowledge(message)
    consumer.close()
    again = client.subscribe(topic, "compacted", is_read_compacted=True)  # nothing comes back
    with pytest.raises(pulsar.Timeout):
        again.receive(1000)
    client.close()
