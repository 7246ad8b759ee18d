"""Topic and subscription lifecycle through the official Go admin client (pulsaradmin):
its requests and its parsing of the answers are the contract, and what it does is checked with the
official Python client (messages kept, skipped, expired, deleted for good)."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator

import pulsar
import pytest

from tests.admin_go import GoAdmin
from tests.broker.e2e.conftest import Standalone

NS = "public/default"


@pytest.fixture
def admin(standalone: Standalone) -> Iterator[GoAdmin]:
    driver = GoAdmin(standalone.web_service_url)
    yield driver
    driver.close()


def _id(message_id: pulsar.MessageId) -> dict[str, int]:
    return {"ledgerId": message_id.ledger_id(), "entryId": message_id.entry_id()}


def _backlog(admin: GoAdmin, topic: str, subscription: str) -> int:
    return int(admin.ok("topics.stats", topic=topic)["subscriptions"][subscription]["msgBacklog"])


def test_topics_are_created_listed_and_refused_twice(standalone: Standalone, admin: GoAdmin) -> None:
    plain, partitioned = f"persistent://{NS}/plain", f"persistent://{NS}/parted"
    admin.ok("topics.create", topic=plain, partitions=0)
    assert admin("topics.create", topic=plain, partitions=0).code == 409
    admin.ok("topics.create", topic=partitioned, partitions=4)
    assert admin.ok("topics.metadata", topic=partitioned)["partitions"] == 4
    admin.ok("topics.update", topic=partitioned, partitions=6)
    assert admin("topics.update", topic=partitioned, partitions=2).code == 409
    assert admin("topics.create", topic=partitioned, partitions=0).code == 409
    assert admin("topics.create", topic=plain, partitions=3).code == 409
    listed = admin.ok("topics.list", namespace=NS)
    assert plain in listed["nonPartitioned"]
    assert partitioned in listed["partitioned"]
    unknown = admin("topics.create", topic="persistent://public/nowhere/t", partitions=0)
    assert unknown.code == 404, unknown


def test_messages_are_peeked_skipped_reset_and_expired(standalone: Standalone, admin: GoAdmin) -> None:
    topic = f"persistent://{NS}/inspected"
    client = standalone.client()
    producer = client.create_producer(topic, batching_enabled=False)
    admin.ok("subscriptions.create", topic=topic, subscription="all", position="earliest")
    ids = [producer.send(f"m{i}".encode(), properties={"i": str(i)}) for i in range(10)]
    admin.ok("subscriptions.create", topic=topic, subscription="later", **_id(ids[6]))
    admin.ok("subscriptions.create", topic=topic, subscription="end", position="latest")
    assert admin("subscriptions.create", topic=topic, subscription="end", position="latest").code == 409
    assert sorted(admin.ok("subscriptions.list", topic=topic)) == ["all", "end", "later"]
    assert [_backlog(admin, topic, s) for s in ("all", "later", "end")] == [10, 4, 0]

    peeked = admin.ok("subscriptions.peek", topic=topic, subscription="all", n=3)
    assert [m["payload"] for m in peeked] == ["m0", "m1", "m2"]
    assert [m["properties"]["i"] for m in peeked] == ["0", "1", "2"]
    assert peeked[0]["id"]["ledgerId"] == ids[0].ledger_id()
    assert peeked[0]["id"]["entryId"] == ids[0].entry_id()
    found = admin.ok("subscriptions.getMessageById", topic=topic, **_id(ids[4]))
    assert [m["payload"] for m in found] == ["m4"]
    missing = admin("subscriptions.getMessageById", topic=topic, ledgerId=ids[9].ledger_id(), entryId=999)
    assert missing.code == 404
    assert admin.ok("topics.lastMessageId", topic=topic)["entryId"] == ids[9].entry_id()
    assert admin("subscriptions.peek", topic=topic, subscription="end", n=1).code == 404
    assert admin("subscriptions.peek", topic=topic, subscription="missing", n=1).code == 404

    # Skip: the next two count as acknowledged; the consumer starts after them.
    admin.ok("subscriptions.skip", topic=topic, subscription="all", n=2)
    assert _backlog(admin, topic, "all") == 8
    assert admin.ok("subscriptions.peek", topic=topic, subscription="all", n=1)[0]["payload"] == "m2"

    # Reset to a message id: read again from it.
    admin.ok("subscriptions.resetToMessageId", topic=topic, subscription="all", **_id(ids[7]))
    consumer = client.subscribe(topic, "all")
    assert [consumer.receive(10_000).data() for _ in range(3)] == [b"m7", b"m8", b"m9"]
    consumer.close()

    # Expire: what was published over a second ago is acknowledged; what is newer stays.
    time.sleep(1.5)
    producer.send(b"fresh")
    admin.ok("subscriptions.expire", topic=topic, subscription="later", n=1)
    assert _backlog(admin, topic, "later") == 1
    assert admin.ok("subscriptions.peek", topic=topic, subscription="later", n=1)[0]["payload"] == "fresh"

    # Clear-backlog, then a forced delete of a subscription in use.
    admin.ok("subscriptions.clearBacklog", topic=topic, subscription="later")
    assert _backlog(admin, topic, "later") == 0
    busy = client.subscribe(topic, "later")
    producer.send(b"unread")
    assert _backlog(admin, topic, "later") == 1
    assert admin("subscriptions.delete", topic=topic, subscription="later").code == 412
    admin.ok("subscriptions.delete", topic=topic, subscription="later", force=True)
    # The consumer it disconnected reconnects and, as in Pulsar, makes the subscription anew, at
    # the end of the topic: what the deleted one had not consumed is not its backlog any more.
    after = admin.ok("subscriptions.list", topic=topic)
    assert "later" not in after or _backlog(admin, topic, "later") == 0, after
    busy.close()
    client.close()


def test_a_deleted_topic_is_gone_for_good(standalone: Standalone, admin: GoAdmin) -> None:
    topic = f"persistent://{NS}/doomed"
    client = standalone.client()
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"old{i}".encode())
    refused = admin("topics.delete", topic=topic, force=False, nonPartitioned=True)
    assert refused.code == 412, refused
    admin.ok("topics.delete", topic=topic, force=True, nonPartitioned=True)
    assert topic not in (admin.ok("topics.list", namespace=NS)["nonPartitioned"] or [])
    assert admin("topics.delete", topic=topic, force=True, nonPartitioned=True).code == 404

    # Used again, it starts empty: nothing of the old messages comes back.
    fresh = client.create_producer(topic, batching_enabled=False)
    reader = client.subscribe(topic, "again", initial_position=pulsar.InitialPosition.Earliest)
    fresh.send(b"new")
    assert reader.receive(10_000).data() == b"new"
    with pytest.raises(pulsar.Timeout):
        reader.receive(1_000)
    client.close()


def test_a_terminated_topic_takes_no_more_messages(standalone: Standalone, admin: GoAdmin) -> None:
    topic = f"persistent://{NS}/finished"
    client = standalone.client()
    producer = client.create_producer(topic, batching_enabled=False)
    last = [producer.send(f"m{i}".encode()) for i in range(3)][-1]
    terminated = admin.ok("topics.terminate", topic=topic)
    assert (terminated["ledgerId"], terminated["entryId"]) == (last.ledger_id(), last.entry_id())
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"too late")
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)
    assert admin.ok("topics.internalStats", topic=topic)["state"] == "Terminated"
    reader = client.subscribe(topic, "r", initial_position=pulsar.InitialPosition.Earliest)
    assert [reader.receive(10_000).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]
    client.close()


def test_tenants_and_a_forced_namespace_delete(standalone: Standalone, admin: GoAdmin) -> None:
    cluster = admin.ok("tenants.get", tenant="public")["allowedClusters"][0]
    admin.ok("tenants.create", tenant="acme", clusters=[cluster])
    assert admin("tenants.create", tenant="acme", clusters=[cluster]).code == 409
    admin.ok("tenants.update", tenant="acme", clusters=[cluster])
    assert admin("tenants.update", tenant="nobody", clusters=[cluster]).code == 404
    assert admin("tenants.update", tenant="acme", clusters=["atlantis"]).code == 412
    admin.ok("namespaces.create", namespace="acme/orders")
    topic = "persistent://acme/orders/placed"
    client = standalone.client()
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    assert admin("namespaces.delete", namespace="acme/orders").code == 409
    assert admin("tenants.delete", tenant="acme").code == 409

    connection = http.client.HTTPConnection("127.0.0.1", standalone.web_port, timeout=30)
    connection.request("DELETE", "/admin/v2/namespaces/acme/orders?force=true")
    assert connection.getresponse().status == 204
    connection.close()
    assert not admin.ok("namespaces.list", tenant="acme")

    # Created again under the same name: empty.
    admin.ok("namespaces.create", namespace="acme/orders")
    assert not admin.ok("topics.list", namespace="acme/orders")["nonPartitioned"]
    reader = client.subscribe(topic, "after", initial_position=pulsar.InitialPosition.Earliest)
    with pytest.raises(pulsar.Timeout):
        reader.receive(1_000)
    client.close()
