"""One client process of the scale benchmark: a producer and a consumer on each of its topics,
opened concurrently through the official client's asyncio API, driven by commands on stdin.

    .venv/bin/python bench/scale_client.py pulsar://127.0.0.1:6650 public/scale-a:0:1000
    .venv/bin/python bench/scale_client.py pulsar://127.0.0.1:6650 public/scale-a:0:1000 public/scale-b:0:4000

Each TOPICS argument is ``namespace:first:count``: topics ``t<first>`` … ``t<first+count-1>`` of
that namespace. The process opens them (at most ``--concurrency`` opens in flight), prints one JSON
line ``{"event": "ready", ...}`` and then answers each command line on stdin with one JSON line
(each after ``@scale ``: the client library's own log lines share stdout):

``roundtrip``            one message through every topic: each producer sends, each consumer
                         receives it (and acknowledges); seconds until the last arrived
``send [NAMESPACE]``     one message on every topic (of NAMESPACE, else all), sent at once; the
                         wall-clock time of the last receipt (for a move's "acknowledged again")
``quit``                 close everything and exit

Every send's result is checked: a failed send is counted and reported, never a sample.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Topic:
    name: str
    namespace: str
    producer: Any = None
    consumer: Any = None
    #: set when the consumer receives a message carrying this sequence number
    received: dict[int, asyncio.Event] = field(default_factory=dict)


def parse_topics(specs: list[str]) -> list[Topic]:
    topics = []
    for spec in specs:
        namespace, first, count = spec.rsplit(":", 2)
        for i in range(int(first), int(first) + int(count)):
            topics.append(Topic(f"persistent://{namespace}/t{i}", namespace))
    return topics


#: long enough that a slow move shows as its length rather than as failed sends
SEND_TIMEOUT_MS = 180_000
#: the head of every answer line (the client library logs to stdout too)
ANSWER = "@scale "


def emit(**fields: Any) -> None:
    print(ANSWER + json.dumps(fields), flush=True)


async def bounded(concurrency: int, jobs: list[Any]) -> list[Any]:
    """Run the coroutines ``jobs`` with at most ``concurrency`` at a time; exceptions returned."""
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Any) -> Any:
        async with gate:
            return await job

    return await asyncio.gather(*(one(j) for j in jobs), return_exceptions=True)


class ScaleClient:
    def __init__(self, service_url: str, topics: list[Topic], concurrency: int, log_level: str) -> None:
        import pulsar
        import pulsar.asyncio as pulsar_asyncio

        self.topics = topics
        self.concurrency = concurrency
        self.sequence = 0
        self.client = pulsar_asyncio.Client(
            service_url,
            operation_timeout_seconds=120,
            # a Python logger can abort the exit; its lines go to stdout, between the answers
            logger=pulsar.ConsoleLogger(getattr(pulsar.LoggerLevel, log_level)),
        )
        self.receivers: list[asyncio.Task[None]] = []

    async def open(self) -> dict[str, Any]:
        started = time.monotonic()

        async def open_one(topic: Topic) -> None:
            topic.producer = await self.client.create_producer(
                topic.name, batching_enabled=False, send_timeout_millis=SEND_TIMEOUT_MS
            )
            topic.consumer = await self.client.subscribe(topic.name, "scale")
            self.receivers.append(asyncio.create_task(self._receive(topic)))

        results = await bounded(self.concurrency, [open_one(t) for t in self.topics])
        failures = [repr(r) for r in results if isinstance(r, BaseException)]
        return {"seconds": time.monotonic() - started, "opened": len(self.topics) - len(failures),
                "failed": len(failures), "first_failure": failures[0] if failures else ""}  # fmt: skip

    async def _receive(self, topic: Topic) -> None:
        while True:
            message = await topic.consumer.receive()
            await topic.consumer.acknowledge(message)
            sequence = int(message.data())
            topic.received.setdefault(sequence, asyncio.Event()).set()

    async def _send(self, topics: list[Topic], sequence: int) -> tuple[list[float], list[str]]:
        async def send_one(topic: Topic) -> float:
            await topic.producer.send(str(sequence).encode())
            return time.time()

        results = await bounded(self.concurrency, [send_one(t) for t in topics])
        receipts = [r for r in results if isinstance(r, float)]
        failures = [repr(r) for r in results if isinstance(r, BaseException)]
        return receipts, failures

    async def roundtrip(self) -> dict[str, Any]:
        self.sequence += 1
        sequence = self.sequence
        for topic in self.topics:
            topic.received.setdefault(sequence, asyncio.Event())
        started = time.monotonic()
        receipts, failures = await self._send(self.topics, sequence)
        await asyncio.gather(*(t.received[sequence].wait() for t in self.topics))
        return {"seconds": time.monotonic() - started, "sent": len(receipts), "failed": len(failures),
                "first_failure": failures[0] if failures else ""}  # fmt: skip

    async def send(self, namespace: str | None) -> dict[str, Any]:
        self.sequence += 1
        chosen = [t for t in self.topics if namespace is None or t.namespace == namespace]
        receipts, failures = await self._send(chosen, self.sequence)
        return {"sent": len(receipts), "failed": len(failures), "last_receipt": max(receipts, default=0.0),
                "first_failure": failures[0] if failures else ""}  # fmt: skip

    async def close(self) -> None:
        for task in self.receivers:
            task.cancel()
        await self.client.close()


async def serve(args: argparse.Namespace) -> None:
    client = ScaleClient(args.service_url, parse_topics(args.topics), args.concurrency, args.log_level)
    emit(event="ready", **await client.open())
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] == "roundtrip":
            emit(event="roundtrip", **await client.roundtrip())
        elif words[0] == "send":
            emit(event="sent", **await client.send(words[1] if len(words) > 1 else None))
        else:
            emit(event="error", message=f"unknown command {words[0]!r}")
    await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("service_url")
    parser.add_argument("topics", nargs="+", help="namespace:first:count, one or more")
    parser.add_argument(
        "--concurrency", type=int, default=200, help="opens and sends in flight (default 200)"
    )
    parser.add_argument(
        "--log-level", choices=("Debug", "Info", "Warn", "Error"), default="Warn", help="the client library's"
    )
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
