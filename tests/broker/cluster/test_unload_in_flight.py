"""An unload while sends are being written (``magnetar standalone``, official client): every
acknowledged message is stored exactly once, whoever owns the topic next."""

from __future__ import annotations

import threading
import time

import pulsar

from tests.broker.conftest import admin_call
from tests.broker.e2e.conftest import Standalone

MESSAGES = 4000


def test_unload_during_a_burst_of_sends_stores_each_message_once(standalone: Standalone) -> None:
    broker = standalone
    topic = "persistent://public/default/unload-in-flight"
    client = broker.client()
    producer = client.create_producer(
        topic, batching_enabled=False, send_timeout_millis=60_000, max_pending_messages=MESSAGES
    )
    acked: list[int] = []
    lock = threading.Lock()

    def done(result: pulsar.Result, _id: pulsar.MessageId, index: int) -> None:
        assert result == pulsar.Result.Ok
        with lock:
            acked.append(index)

    for index in range(MESSAGES):
        producer.send_async(str(index).encode(), lambda r, m, i=index: done(r, m, i))
        if index == MESSAGES // 4:
            # Sends are on the wire and in the bookies' pipeline when the topic is unloaded.
            unloading = threading.Thread(
                target=admin_call,
                args=("PUT", f"{broker.web_service_url}/admin/v2/namespaces/public/default/unload"),
            )
            unloading.start()
    producer.flush()
    unloading.join()
    deadline = time.monotonic() + 30
    while len(acked) < MESSAGES and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(acked) == list(range(MESSAGES))

    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    stored = []
    while reader.has_message_available():
        stored.append(int(reader.read_next(10_000).data()))
    twice = sorted({i for i in stored if stored.count(i) > 1})
    assert not twice, f"{len(twice)} messages stored twice, e.g. {twice[:5]}"
    assert sorted(stored) == list(range(MESSAGES))
    client.close()
