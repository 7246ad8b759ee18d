"""A connection's slow creations run beside its other commands, as in Pulsar's ServerCnx: a
PRODUCER waiting for its topic's load does not hold the connection's next PRODUCER, a second
create of the same id is refused ServiceNotReady, and a close of an id still being created is
answered after the creation, leaving nothing attached.

One connection over loopback with a topic source whose loads wait until the test lets them go
(the broker's own topics would load too fast to catch one in the act)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from magnetar.broker.cnx.connection import ConnectionDeps, ServerConnection
from magnetar.broker.config import BrokerConfig
from magnetar.broker.managed_ledger import ManagedLedgerConfig
from magnetar.broker.non_persistent.memory_ledger import MemoryLedger
from magnetar.broker.protocol import commands
from magnetar.broker.protocol.frames import encode, parse_frame
from magnetar.broker.topic import Topic, TopicName
from magnetar.proto import PulsarApi_pb2 as api

T = commands.T
SLOW = "persistent://public/default/slow"
FAST = "persistent://public/default/fast"


class HeldTopics:
    """Topics that load at once, except SLOW, which waits for ``release``."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.loaded: dict[str, Topic] = {}

    async def get_or_load(self, name: str) -> Topic:
        if name == SLOW:
            await self.release.wait()
        if name not in self.loaded:
            topic_name = TopicName.parse(name)
            ledger = MemoryLedger(topic_name.managed_ledger_name, ManagedLedgerConfig())
            await ledger.open()
            self.loaded[name] = await Topic.load(topic_name, ledger, deduplication=False)
        return self.loaded[name]


class NoSchemas:
    async def for_producer(self, topic: str, schema: object) -> bytes:
        return b""


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def send(self, command: api.BaseCommand) -> None:
        self.writer.write(encode(command))

    async def receive(self) -> api.BaseCommand:
        (size,) = struct.unpack(">I", await asyncio.wait_for(self.reader.readexactly(4), 30))
        return parse_frame(await self.reader.readexactly(size)).command

    async def nothing_pending(self) -> None:
        """Nothing is answered before a PING's PONG (the connection answers PING in order)."""
        self.send(commands.command(T.PING, "ping"))
        reply = await self.receive()
        assert reply.type == T.PONG, reply


@pytest.fixture
async def connected() -> AsyncIterator[tuple[Client, HeldTopics]]:
    topics = HeldTopics()
    deps = ConnectionDeps(
        config=BrokerConfig(),
        topics=topics,
        namespace_topics=cast(Any, None),
        partitioned=cast(Any, None),
        lookups=cast(Any, None),
        new_producer_name=lambda: "generated",
        schemas=cast(Any, NoSchemas()),
        compactions=cast(Any, None),
    )

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ServerConnection(deps, reader, writer, on_close=lambda _: None).serve()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = Client(*await asyncio.open_connection("127.0.0.1", port))
    client.send(commands.command(T.CONNECT, "connect", client_version="test", protocol_version=21))
    assert (await client.receive()).type == T.CONNECTED
    yield client, topics
    topics.release.set()
    client.writer.close()
    server.close()
    await server.wait_closed()


def producer(topic: str, producer_id: int, request_id: int) -> api.BaseCommand:
    return commands.command(
        T.PRODUCER, "producer", topic=topic, producer_id=producer_id, request_id=request_id
    )


async def test_a_producer_waiting_for_its_topic_does_not_hold_the_next_one(
    connected: tuple[Client, HeldTopics],
) -> None:
    client, topics = connected
    client.send(producer(SLOW, 1, 1))
    client.send(producer(FAST, 2, 2))
    first = await client.receive()
    assert (first.type, first.producer_success.request_id) == (T.PRODUCER_SUCCESS, 2)
    await client.nothing_pending()  # the slow one is still waiting
    topics.release.set()
    second = await client.receive()
    assert (second.type, second.producer_success.request_id) == (T.PRODUCER_SUCCESS, 1)
    assert set(topics.loaded[SLOW].producers) == {"generated"}


async def test_a_second_create_of_a_pending_id_is_refused_and_a_close_waits_for_the_first(
    connected: tuple[Client, HeldTopics],
) -> None:
    client, topics = connected
    client.send(producer(SLOW, 1, 1))
    client.send(producer(SLOW, 1, 2))  # a client that timed out and retried
    refused = await client.receive()
    assert (refused.type, refused.error.request_id, refused.error.error) == (T.ERROR, 2, api.ServiceNotReady)
    assert "already being created" in refused.error.message
    client.send(commands.command(T.CLOSE_PRODUCER, "close_producer", producer_id=1, request_id=3))
    await client.nothing_pending()  # the close waits for the creation
    topics.release.set()
    created, closed = await client.receive(), await client.receive()
    assert (created.type, created.producer_success.request_id) == (T.PRODUCER_SUCCESS, 1)
    assert (closed.type, closed.success.request_id) == (T.SUCCESS, 3)
    assert not topics.loaded[SLOW].producers  # what the creation attached, the close took away
