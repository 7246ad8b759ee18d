"""Hostile and mistaken commands: a bad command gets an error for that command and the
connection, with its other producers and consumers, goes on; frames mutated at random never
crash the broker, change an acknowledged message or leave a traceback in its log."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from magnetar.broker.protocol import commands
from magnetar.broker.protocol.frames import encode, payload_section
from magnetar.proto import PulsarApi_pb2 as api
from tests.broker.e2e.conftest import Standalone
from tests.broker.e2e.test_malformed import RawConnection

T = commands.T
TOPIC = "persistent://public/default/hostile"


def _message(sequence_id: int, body: bytes) -> bytes:
    return payload_section(
        api.MessageMetadata(producer_name="raw", sequence_id=sequence_id, publish_time=1), body
    )


def _producer(raw: RawConnection, topic: str, producer_id: int, request_id: int) -> api.BaseCommand:
    raw.send(
        commands.command(T.PRODUCER, "producer", topic=topic, producer_id=producer_id, request_id=request_id)
    )
    reply = raw.receive()
    assert reply is not None
    return reply


def _working_producer(raw: RawConnection) -> None:
    """Producer 1 on TOPIC, looked up first as a client does (the lookup takes the bundle)."""
    raw.send(commands.command(T.LOOKUP, "lookupTopic", topic=TOPIC, request_id=100))
    assert raw.receive().type == T.LOOKUP_RESPONSE  # type: ignore[union-attr]
    assert _producer(raw, TOPIC, 1, 1).type == T.PRODUCER_SUCCESS


def _assert_serving(raw: RawConnection, producer_id: int, sequence_id: int) -> None:
    """The connection's working producer still gets its receipts."""
    raw.send(commands.command(T.SEND, "send", producer_id=producer_id, sequence_id=sequence_id),
             _message(sequence_id, b"still here"))  # fmt: skip
    reply = raw.receive()
    assert reply is not None
    assert reply.type == T.SEND_RECEIPT, reply
    assert reply.send_receipt.sequence_id == sequence_id


def test_commands_for_a_missing_namespace_get_errors_and_the_connection_survives(
    standalone: Standalone,
) -> None:
    raw = RawConnection(standalone)
    raw.connect()
    _working_producer(raw)
    refused = _producer(raw, "persistent://no-such-tenant/no-such-ns/t", 2, 2)
    assert refused.type == T.ERROR
    assert refused.error.request_id == 2
    assert refused.error.error == api.TopicNotFound
    assert "no-such-tenant/no-such-ns" in refused.error.message
    _assert_serving(raw, 1, 0)
    raw.send(commands.command(T.SUBSCRIBE, "subscribe", topic="persistent://no-such-tenant/no-such-ns/t",
                              subscription="s", subType=api.CommandSubscribe.Exclusive,
                              consumer_id=1, request_id=3))  # fmt: skip
    reply = raw.receive()
    assert reply is not None
    assert reply.type == T.ERROR
    assert reply.error.request_id == 3
    _assert_serving(raw, 1, 1)
    raw.send(commands.command(T.GET_TOPICS_OF_NAMESPACE, "getTopicsOfNamespace",
                              namespace="no-such-tenant/no-such-ns", request_id=4))  # fmt: skip
    reply = raw.receive()
    assert reply is not None
    assert reply.type in (T.ERROR, T.GET_TOPICS_OF_NAMESPACE_RESPONSE)
    _assert_serving(raw, 1, 2)
    assert "Traceback" not in standalone.log_path.read_text()


def test_invalid_topic_names_get_errors_and_the_connection_survives(standalone: Standalone) -> None:
    raw = RawConnection(standalone)
    raw.connect()
    _working_producer(raw)
    for request_id, name in enumerate(
        ["", "persistent://", "no-scheme", "persistent://a/b/c/\x00", "x" * 5000], 2
    ):
        reply = _producer(raw, name, request_id, request_id)
        assert reply.type == T.ERROR, name
        assert reply.error.request_id == request_id
        _assert_serving(raw, 1, request_id)
    assert "Traceback" not in standalone.log_path.read_text()


def _valid_frames() -> list[bytes]:
    """A producer's and a consumer's session on their own topic, frame by frame."""
    topic = "persistent://public/default/fuzzed"
    return [
        encode(commands.command(T.CONNECT, "connect", client_version="fuzz", protocol_version=21)),
        encode(commands.command(T.LOOKUP, "lookupTopic", topic=topic, request_id=1)),
        encode(commands.command(T.PRODUCER, "producer", topic=topic, producer_id=1, request_id=2)),
        encode(commands.command(T.SEND, "send", producer_id=1, sequence_id=0), _message(0, b"fuzz")),
        encode(
            commands.command(
                T.SUBSCRIBE,
                "subscribe",
                topic=topic,
                subscription="f",
                subType=api.CommandSubscribe.Shared,
                consumer_id=1,
                request_id=3,
            )
        ),
        encode(commands.command(T.FLOW, "flow", consumer_id=1, messagePermits=10)),
        encode(
            commands.command(
                T.ACK,
                "ack",
                consumer_id=1,
                ack_type=api.CommandAck.Individual,
                message_id=[commands.message_id(0, 0)],
            )
        ),
        encode(
            commands.command(
                T.SEEK, "seek", consumer_id=1, request_id=4, message_id=commands.message_id(0, 0)
            )
        ),
        encode(commands.command(T.CLOSE_PRODUCER, "close_producer", producer_id=1, request_id=5)),
    ]


def _mutate(frame: bytes, rng: random.Random) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        where = rng.randrange(4, len(data))  # the frame size stays: a stream the broker can follow
        kind = rng.random()
        if kind < 0.6:
            data[where] = rng.randrange(256)
        elif kind < 0.8:
            data[where] ^= 1 << rng.randrange(8)
        else:
            data[where] = rng.choice([0x00, 0x7F, 0x80, 0xFF])
    return bytes(data)


def _answered_or_closed(raw: RawConnection) -> None:
    """Reads until the broker answers the session's closing PING, or closes the connection: either
    says it has handled every frame before (it handles a connection's frames in order)."""
    raw.sock.settimeout(10)
    try:
        while (reply := raw.receive()) is not None:
            if reply.type == T.PONG:
                return
    except TimeoutError:
        raise AssertionError(
            "the broker neither answered the PING nor closed the connection in 10 s"
        ) from None


def test_mutated_frames_leave_the_broker_serving_and_acknowledged_messages_intact(
    standalone: Standalone,
) -> None:
    client = standalone.client()
    producer = client.create_producer("persistent://public/default/kept")
    acknowledged = [producer.send(f"kept-{i}".encode()) for i in range(20)]
    rng = random.Random(22)
    frames = _valid_frames()
    for _ in range(300):
        raw = RawConnection(standalone)
        target = rng.randrange(1, len(frames))  # CONNECT first, as is, so the command is handled
        session = [frames[0], *frames[1:target], _mutate(frames[target], rng), encode(commands.ping())]
        try:
            raw.send_raw(b"".join(session))
            _answered_or_closed(raw)
        except OSError:
            pass  # closed by the broker: allowed for a frame it cannot parse
        finally:
            raw.sock.close()
    reader = client.create_reader("persistent://public/default/kept", pulsar.MessageId.earliest)
    received = [reader.read_next(timeout_millis=10_000) for _ in acknowledged]
    assert [m.data() for m in received] == [f"kept-{i}".encode() for i in range(20)]
    assert [m.message_id() for m in received] == acknowledged
    producer.send(b"after the fuzzing")
    client.close()
    log = standalone.log_path.read_text()
    assert "Traceback" not in log, log[log.index("Traceback") - 500 :][:3000]


def test_a_topic_name_that_is_not_utf8_gets_an_error_and_the_connection_survives(
    standalone: Standalone,
) -> None:
    raw = RawConnection(standalone)
    raw.connect()
    _working_producer(raw)
    command = commands.command(
        T.PRODUCER, "producer", topic="persistent://public/default/X", producer_id=2, request_id=2
    )
    frame = bytearray(encode(command))
    frame[frame.index(b"/X") + 1] = 0xFF  # protobuf hands the broker bytes, not a str
    raw.send_raw(bytes(frame))
    reply = raw.receive()
    assert reply is not None
    assert reply.type == T.ERROR
    assert reply.error.request_id == 2
    assert reply.error.error == api.InvalidTopicName
    _assert_serving(raw, 1, 0)
    raw.send(commands.command(T.LOOKUP, "lookupTopic", topic="persistent://public/default/X", request_id=3))
    assert raw.receive().type == T.LOOKUP_RESPONSE  # type: ignore[union-attr]
    assert "Traceback" not in standalone.log_path.read_text()


@pytest.fixture
def two_per_ip(tmp_path: Path) -> Iterator[Standalone]:
    server = Standalone(tmp_path / "standalone", broker_max_connections_per_ip=2).start()
    yield server
    try:
        server.stop()
    finally:
        server.kill()


def test_connections_beyond_the_limit_per_ip_are_refused_with_a_reason(two_per_ip: Standalone) -> None:
    first, second = RawConnection(two_per_ip), RawConnection(two_per_ip)
    first.connect()
    second.connect()
    third = RawConnection(two_per_ip)
    reply = third.receive()
    assert reply is not None
    assert reply.type == T.ERROR
    assert "broker_max_connections_per_ip" in reply.error.message
    assert third.closed_after()
    first.send(commands.ping())
    assert first.receive().type == T.PONG  # type: ignore[union-attr]
    first.sock.close()
    for _ in range(50):  # the broker notices the close at its next read
        fourth = RawConnection(two_per_ip)
        fourth.send(commands.command(T.CONNECT, "connect", client_version="raw", protocol_version=21))
        reply = fourth.receive()
        if reply is not None and reply.type == T.CONNECTED:
            break
        fourth.sock.close()
        time.sleep(0.1)
    else:
        raise AssertionError("a connection freed by a close is never given back")
