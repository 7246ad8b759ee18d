"""Producer access modes with the official client: Exclusive refuses a second producer,
ExclusiveWithFencing takes the topic and nothing the fenced producer sends afterwards is stored,
WaitForExclusive waits for its turn, and an exclusive producer keeps the topic through a bundle
unload and a broker restart."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pulsar
import pytest

from tests.broker.e2e.conftest import Standalone

TOPIC = "persistent://public/default/access-"
Mode = pulsar.ProducerAccessMode


def _producer(
    client: pulsar.Client, topic: str, mode: pulsar.ProducerAccessMode, **options: object
) -> pulsar.Producer:
    return client.create_producer(topic, access_mode=mode, batching_enabled=False, **options)  # type: ignore[arg-type]


def _everything(client: pulsar.Client, topic: str) -> list[bytes]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(5000).data())
    reader.close()
    return got


def _send_until_refused(producer: pulsar.Producer, data: bytes) -> None:
    """Sends until one fails (the first ones may still race the broker's CLOSE_PRODUCER); such a
    racing send is stored before the fence or not at all, never after the new holder's."""
    for _ in range(50):
        producer.send(data)
        time.sleep(0.1)


def test_exclusive_refuses_a_second_producer_until_the_first_closes(client: pulsar.Client) -> None:
    topic = TOPIC + "exclusive"
    first = _producer(client, topic, Mode.Exclusive)
    first.send(b"first")
    with pytest.raises(pulsar.ProducerFenced):
        _producer(client, topic, Mode.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        _producer(client, topic, Mode.Shared)
    first.close()
    second = _producer(client, topic, Mode.Exclusive)
    second.send(b"second")
    assert _everything(client, topic) == [b"first", b"second"]


def test_exclusive_is_refused_while_shared_producers_write(client: pulsar.Client) -> None:
    topic = TOPIC + "shared-first"
    a = _producer(client, topic, Mode.Shared)
    b = _producer(client, topic, Mode.Shared)
    with pytest.raises(pulsar.ProducerFenced):
        _producer(client, topic, Mode.Exclusive)
    a.send(b"a")
    b.send(b"b")
    assert sorted(_everything(client, topic)) == [b"a", b"b"]


def test_fencing_takes_the_topic_and_the_fenced_producer_stores_nothing_more(standalone: Standalone) -> None:
    topic = TOPIC + "fencing"
    old_client, new_client = standalone.client(), standalone.client()
    old = _producer(old_client, topic, Mode.Exclusive)
    old.send(b"old-1")
    new = _producer(new_client, topic, Mode.ExclusiveWithFencing)
    new.send(b"new-1")
    with pytest.raises(pulsar.ProducerFenced):
        _send_until_refused(old, b"old-late")
    new.send(b"new-2")
    assert _everything(new_client, topic) == [b"old-1", b"new-1", b"new-2"]
    with pytest.raises(pulsar.ProducerFenced):  # the topic stays taken
        _producer(old_client, topic, Mode.Exclusive)
    old_client.close()
    new_client.close()


def test_wait_for_exclusive_gets_the_topic_when_the_holder_closes(client: pulsar.Client) -> None:
    topic = TOPIC + "wait"
    holder = _producer(client, topic, Mode.Exclusive)
    holder.send(b"holder")
    created: list[pulsar.Producer] = []
    waiter = threading.Thread(target=lambda: created.append(_producer(client, topic, Mode.WaitForExclusive)))
    waiter.start()
    waiter.join(2.0)
    assert waiter.is_alive()
    assert not created
    holder.send(b"holder-still")  # the connection goes on while one of its producers waits
    holder.close()
    waiter.join(15)
    assert created, "WaitForExclusive producer never got the topic"
    created[0].send(b"waiter")
    assert _everything(client, topic) == [b"holder", b"holder-still", b"waiter"]


def test_an_exclusive_producer_keeps_the_topic_through_an_unload_and_a_restart(
    standalone: Standalone,
) -> None:
    topic = TOPIC + "moves"
    client, other = standalone.client(), standalone.client()
    producer = _producer(client, topic, Mode.Exclusive, send_timeout_millis=60_000)
    producer.send(b"0")
    unload = urllib.request.Request(
        f"{standalone.web_service_url}/admin/v2/persistent/public/default/access-moves/unload", method="PUT"
    )
    urllib.request.urlopen(unload, timeout=10).close()
    producer.send(b"1")  # reconnected with its epoch: still the holder
    with pytest.raises(pulsar.ProducerFenced):
        _producer(other, topic, Mode.Exclusive)
    standalone.restart()
    producer.send(b"2")
    with pytest.raises(pulsar.ProducerFenced):
        _producer(other, topic, Mode.Exclusive)
    assert _everything(other, topic) == [b"0", b"1", b"2"]
    stats = json.load(
        urllib.request.urlopen(
            f"{standalone.web_service_url}/admin/v2/persistent/public/default/access-moves/stats", timeout=10
        )
    )
    assert [p["accessMode"] for p in stats["publishers"]] == ["Exclusive"]
    assert stats["topicEpoch"] == 0  # granted once, kept through the unload and the restart
    client.close()
    other.close()
