"""One lean client process of a window benchmark: producers *or* consumers of a few
topics, callbacks that only record, every send's result checked.

    .venv/bin/python bench/lean_client.py produce pulsar://127.0.0.1:6650 t1,t2 --rate 125 --out p.json
    .venv/bin/python bench/lean_client.py consume pulsar://127.0.0.1:6650 t1,t2 --out c.json
    .venv/bin/python bench/lean_client.py consume pulsar://127.0.0.1:6650 t1 --subscription s1,s2 --out c.json

A producer sends, per topic, ``--rate`` messages a second on a fixed schedule (unbatched unless
``--batching-ms``); each payload starts with the time the send was due (CLOCK_MONOTONIC, shared by
every process of the machine) so a consumer in another process can tell how late each message
came. ``block_if_queue_full`` makes a full queue hold the schedule up (and so show as lateness)
instead of failing the send.
The process runs until SIGTERM or ``--seconds``, then flushes, waits for every receipt, and writes
its records as JSON to ``--out``: per topic the due and receipt times (ns) of every send, or the
due and receive times of every message. A send that fails, or is never answered, fails the run
(exit 1, the reasons on stderr): it is never a sample.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

STAMP = struct.Struct("<q")  # the due time, ns, at the head of every payload
READY = "lean client ready"


def _client(args: argparse.Namespace) -> Any:
    import pulsar

    log = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)  # a Python logger can abort the exit
    token = args.token_file.read_text().strip() if args.token_file else None
    return pulsar.Client(
        args.url, operation_timeout_seconds=30, logger=log, listener_name=args.listener_name or None,
        authentication=pulsar.AuthenticationToken(token) if token else None,
    )  # fmt: skip


def produce(args: argparse.Namespace, stop: threading.Event) -> dict[str, Any]:
    import pulsar

    client = _client(args)
    batching = {
        "batching_enabled": args.batching_ms > 0,
        "batching_max_publish_delay_ms": max(1, args.batching_ms),
    }
    options = {**batching, "block_if_queue_full": True, "max_pending_messages": 10_000,
               "send_timeout_millis": 60_000}  # fmt: skip
    producers = [client.create_producer(topic, **options) for topic in args.topics]
    due_ns: list[list[int]] = [[] for _ in args.topics]
    receipt_ns: list[list[int]] = [[] for _ in args.topics]
    failed: list[str] = []
    ok = pulsar.Result.Ok
    padding = b"x" * max(0, args.size - STAMP.size)
    print(READY, flush=True)
    interval_ns = int(1e9 / (args.rate * len(args.topics)))
    start = time.monotonic_ns()
    deadline = start + int(args.seconds * 1e9)
    sequence = 0
    while not stop.is_set():
        due = start + sequence * interval_ns
        if due >= deadline:
            break
        while (now := time.monotonic_ns()) < due:
            time.sleep(min((due - now) / 1e9, 0.001))
        index = sequence % len(args.topics)
        slot = len(due_ns[index])
        due_ns[index].append(due)
        receipt_ns[index].append(0)

        def done(result: Any, _id: Any, index: int = index, slot: int = slot) -> None:
            if result == ok:
                receipt_ns[index][slot] = time.monotonic_ns()
            else:
                failed.append(f"{args.topics[index]}: {result}")

        producers[index].send_async(STAMP.pack(due) + padding, done)
        sequence += 1
    for producer in producers:
        producer.flush()
    unanswered = sum(1 for times in receipt_ns for t in times if t == 0)
    client.close()
    if failed or unanswered:
        reasons = f"{len(failed)} sends failed {failed[:3]}, {unanswered} unanswered"
        print(f"lean client: {reasons}", file=sys.stderr)
        sys.exit(1)
    return {"topics": args.topics, "due_ns": due_ns, "done_ns": receipt_ns}


def consume(args: argparse.Namespace, stop: threading.Event) -> dict[str, Any]:
    """Each topic read under each of ``--subscription``'s names; with several names, a stream's
    records are keyed ``topic@subscription`` (one name: the topic)."""
    import pulsar

    client = _client(args)
    names = args.subscription.split(",")
    streams = [(t, n) for t in args.topics for n in names]
    due_ns: list[list[int]] = [[] for _ in streams]
    received_ns: list[list[int]] = [[] for _ in streams]

    def listener(index: int) -> Any:
        def on_message(consumer: Any, message: Any) -> None:
            received_ns[index].append(time.monotonic_ns())
            due_ns[index].append(STAMP.unpack_from(message.data())[0])
            consumer.acknowledge(message)

        return on_message

    for index, (topic, name) in enumerate(streams):
        client.subscribe(
            topic, name, message_listener=listener(index),
            consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=1000,
        )  # fmt: skip
    print(READY, flush=True)
    stop.wait(args.seconds)
    client.close()
    keys = [t if len(names) == 1 else f"{t}@{n}" for t, n in streams]
    return {"topics": keys, "due_ns": due_ns, "done_ns": received_ns}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("role", choices=["produce", "consume"])
    parser.add_argument("url", help="service URL, e.g. pulsar://127.0.0.1:6650,127.0.0.1:6652")
    parser.add_argument("topics", type=lambda s: s.split(","), help="comma-separated topic names")
    parser.add_argument("--rate", type=float, default=125, help="messages/s per topic (125)")
    parser.add_argument("--size", type=int, default=256, help="payload bytes (256)")
    parser.add_argument(
        "--batching-ms", type=int, default=0, help="batch sends for this long (0: no batching)"
    )
    parser.add_argument("--seconds", type=float, default=600, help="run at most this long (600)")
    parser.add_argument("--subscription", default="bench", help="subscription name, or comma-separated names")
    parser.add_argument("--out", type=Path, required=True, help="where the records go (JSON)")
    parser.add_argument("--token-file", type=Path, help="token authentication: the file holding it")
    parser.add_argument("--listener-name", default="", help="the brokers' advertised listener to look up")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    records = produce(args, stop) if args.role == "produce" else consume(args, stop)
    args.out.write_text(json.dumps(records))
    os._exit(0)  # the client's threads are closed; skip their slow interpreter teardown


if __name__ == "__main__":
    main()
