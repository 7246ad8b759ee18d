"""Key_Shared delivers as Shared does: three consumers on twelve keys get 600 unbatched
messages each exactly once, every key to one consumer in order, with each consumer receiving in
its own thread as an application does.

A 3-30 s "stall" was reported with the consumers polled in turn from one thread with 50 ms
receive timeouts. It is that loop's, not the broker's: the broker hands all 600 out as they are
published, but twelve keys cannot split evenly over three consumers (350/200/50 here), and the
loop pays a 50 ms timeout for every idle consumer per message of the busy one. The bound below is
loose on purpose: it fails on a stall of seconds, not on a slow machine."""

from __future__ import annotations

import threading
import time

import pulsar

from tests.broker.e2e.conftest import Standalone

TOPIC = "persistent://public/default/key-shared-delivery"


def test_three_key_shared_consumers_receive_every_message_once_in_key_order(standalone: Standalone) -> None:
    client = standalone.client()
    consumers = [
        client.subscribe(TOPIC, "s", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=f"c{i}")
        for i in range(3)
    ]
    producer = client.create_producer(TOPIC, batching_enabled=False)
    for i in range(600):
        producer.send_async(f"{i}".encode(), lambda result, _id: None, partition_key=f"k{i % 12}")
    producer.flush()
    received: list[list[tuple[str, int]]] = [[] for _ in consumers]
    started = time.monotonic()

    def receive(index: int) -> None:
        while sum(len(r) for r in received) < 600 and time.monotonic() - started < 10:
            try:
                message = consumers[index].receive(50)
            except pulsar.Timeout:
                continue
            consumers[index].acknowledge(message)
            received[index].append((message.partition_key(), int(message.data())))

    threads = [threading.Thread(target=receive, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.close()
    everything = sorted(n for r in received for _, n in r)
    assert everything == list(range(600)), f"{len(everything)} received, {600 - len(set(everything))} missing"
    owners: dict[str, int] = {}
    for index, messages in enumerate(received):
        for key, _ in messages:
            assert owners.setdefault(key, index) == index, f"{key} went to two consumers"
        for key in {k for k, _ in messages}:
            numbers = [n for k, n in messages if k == key]
            assert numbers == sorted(numbers), f"{key} out of order"
