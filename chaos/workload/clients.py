"""One producer or consumer of the workload, each on its own thread with its own client.

Every message carries properties ``uid`` (producer id and sequence number, the message's
identity across regions) and ``publish_ns`` (the producer's clock when it sent), so a consumer
in any region can name the message and measure end-to-end latency. Its payload starts with its
uid, so no two payloads are alike, and both ends log the payload's digest: a consumer given
another message's bytes under a uid shows in the post-mortem (inconsistent-offsets).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pulsar

from magnetar.chaos.workload.events import EventLog, digest, message_id_text, message_payload, now_ns
from magnetar.common.authentication.client import ClientCredentials

log = logging.getLogger(__name__)
#: the client library's own logger, warnings and errors to stdout (the workload's log). Not a
#: Python logger: with one, about one exit in ten aborts in the library's threads
#: ("terminate called without an active exception", apache/pulsar-client-python#256).
_CLIENT_LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)

SUBSCRIPTION_TYPES = {
    "Exclusive": pulsar.ConsumerType.Exclusive,
    "Shared": pulsar.ConsumerType.Shared,
    "Failover": pulsar.ConsumerType.Failover,
    "KeyShared": pulsar.ConsumerType.KeyShared,
}


@dataclass
class Endpoint:
    """A cluster by name and service URL (events name the cluster a client talks to)."""

    cluster: str
    service_url: str
    #: what the clients authenticate with (``--auth-plugin/--auth-params``); empty: nothing
    credentials: ClientCredentials = field(default_factory=ClientCredentials)
    #: the CAs a pulsar+ssl:// URL's certificate is checked against (empty: the system's)
    trust_certs: str = ""
    #: the brokers' advertised listener to look up (Pulsar's listenerName; empty: the default)
    listener_name: str = ""


#: how often a producer wakes to send what is due, by default: at 500 msg/s, five messages each
#: 10 ms rather than one each 2 ms. A wake-up, with the client's threads and the broker's and
#: bookies' event loops it sets going, costs far more CPU than a send (on this project's 2-core
#: machine, a 20 s run at 500 msg/s: the workload 2.7 CPU-s against 5.3, a standalone 2.6 against
#: 5.8). Rates up to 1/tick messages a second are sent one at a time, each at its own moment.
DEFAULT_TICK_S = 0.01


@dataclass
class ProducerSettings:
    topic: str
    rate: float
    size: int
    keys: int
    batching: bool = False
    #: the producer sends what is due at most this often (0: each message at its own moment)
    tick_s: float = DEFAULT_TICK_S


@dataclass
class ConsumerSettings:
    topic: str
    subscription: str
    subscription_type: str = "Shared"
    replicate_subscription_state: bool = False
    #: a file whose {"cluster": name} tells the consumer to move to that cluster (failover)
    control_file: Path | None = None
    endpoints: dict[str, Endpoint] = field(default_factory=dict)


def _client(endpoint: Endpoint) -> pulsar.Client:
    return pulsar.Client(
        endpoint.service_url,
        operation_timeout_seconds=30,
        logger=_CLIENT_LOG,
        authentication=_authentication(endpoint.credentials),
        tls_trust_certs_file_path=endpoint.trust_certs or None,
        listener_name=endpoint.listener_name or None,
    )


def _authentication(credentials: ClientCredentials) -> pulsar.Authentication | None:
    """The official client's plugin for the credentials ``--auth-plugin/--auth-params`` gave."""
    if credentials.method == "token":
        return pulsar.AuthenticationToken(credentials.data.decode())
    if credentials.method == "basic":
        user, _, password = credentials.data.decode().partition(":")
        return pulsar.AuthenticationBasic(user, password)
    if credentials.method == "tls":
        return pulsar.AuthenticationTLS(credentials.tls_certificate, credentials.tls_key)
    return None


class ProducerWorker(threading.Thread):
    def __init__(
        self, client_id: str, endpoint: Endpoint, settings: ProducerSettings, events: EventLog
    ) -> None:
        super().__init__(name=client_id, daemon=True)
        self.client_id = client_id
        self.endpoint = endpoint
        self.settings = settings
        self.events = events
        self.stopping = threading.Event()
        self.sequence = 0
        self.in_flight = 0
        self._lock = threading.Lock()

    def run(self) -> None:
        client = _client(self.endpoint)
        try:
            producer = client.create_producer(
                self.settings.topic,
                producer_name=self.client_id,
                batching_enabled=self.settings.batching,
                block_if_queue_full=True,
                send_timeout_millis=30_000,
            )
        except pulsar.PulsarException as exc:
            self.events.write("disconnect", self.endpoint.cluster, error=f"create producer: {exc}")
            client.close()
            return
        self.events.write("connect", self.endpoint.cluster)
        interval = 1.0 / self.settings.rate if self.settings.rate > 0 else 0.0
        next_send = time.monotonic()
        while not self.stopping.is_set():
            self._send_one(producer)
            next_send += interval
            delay = next_send - time.monotonic()
            if delay > 0:
                # a message due within the tick goes now, with the others due in it
                self.stopping.wait(max(delay, self.settings.tick_s))
        producer.flush()
        deadline = time.monotonic() + 30
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)
        producer.close()
        client.close()

    def _send_one(self, producer: pulsar.Producer) -> None:
        sequence = self.sequence
        self.sequence += 1
        uid = f"{self.client_id}:{sequence}"
        key = f"k{sequence % self.settings.keys}" if self.settings.keys else None
        payload = message_payload(uid, self.settings.size)
        sent_digest = digest(payload)
        started = now_ns()
        self.events.write("send", self.endpoint.cluster, uid=uid, key=key, digest=sent_digest)
        with self._lock:
            self.in_flight += 1

        def sent(result: pulsar.Result, message_id: pulsar.MessageId) -> None:
            latency = (now_ns() - started) / 1e6
            if result == pulsar.Result.Ok:
                self.events.write(
                    "send_ok", self.endpoint.cluster, uid=uid, key=key, digest=sent_digest,
                    msg_id=message_id_text(message_id), latency_ms=round(latency, 3),
                )  # fmt: skip
            else:
                self.events.write("send_err", self.endpoint.cluster, uid=uid, key=key, digest=sent_digest,
                                  error=str(result))  # fmt: skip
            with self._lock:
                self.in_flight -= 1

        properties = {"uid": uid, "publish_ns": str(started)}
        try:
            producer.send_async(payload, sent, properties=properties, partition_key=key)
        except pulsar.PulsarException as exc:
            self.events.write("send_err", self.endpoint.cluster, uid=uid, key=key, digest=sent_digest,
                              error=str(exc))  # fmt: skip
            with self._lock:
                self.in_flight -= 1


class ConsumerWorker(threading.Thread):
    def __init__(
        self, client_id: str, endpoint: Endpoint, settings: ConsumerSettings, events: EventLog
    ) -> None:
        super().__init__(name=client_id, daemon=True)
        self.client_id = client_id
        self.endpoint = endpoint
        self.settings = settings
        self.events = events
        self.stopping = threading.Event()
        self.last_receive = time.monotonic()

    def run(self) -> None:
        client, consumer = self._subscribe(self.endpoint)
        while not self.stopping.is_set():
            moved = self._requested_cluster()
            if moved is not None and moved.cluster != self.endpoint.cluster:
                self._close(client, consumer)
                self.events.write("switch_cluster", moved.cluster, subscription=self.settings.subscription)
                self.endpoint = moved
                client, consumer = self._subscribe(moved)
            if consumer is None:
                self.stopping.wait(1.0)
                client, consumer = self._subscribe(self.endpoint)
                continue
            try:
                message = consumer.receive(timeout_millis=200)
            except pulsar.Timeout:
                continue
            except pulsar.PulsarException as exc:
                self.events.write(
                    "disconnect",
                    self.endpoint.cluster,
                    subscription=self.settings.subscription,
                    error=str(exc),
                )
                self._close(client, consumer)
                client, consumer = None, None
                continue
            self._received(consumer, message)
        self._close(client, consumer)

    def _received(self, consumer: pulsar.Consumer, message: pulsar.Message) -> None:
        properties = message.properties()
        published = int(properties.get("publish_ns", "0") or 0)
        latency = round((now_ns() - published) / 1e6, 3) if published else None
        common = {
            "subscription": self.settings.subscription,
            "uid": properties.get("uid"),
            "key": message.partition_key() or None,
            "msg_id": message_id_text(message.message_id()),
        }
        # the payload's digest and the client's redelivery count only on the receipt: they tell
        # another message's bytes, and a redelivery the consumer was told of, from a fault
        self.events.write(
            "receive",
            self.endpoint.cluster,
            latency_ms=latency,
            digest=digest(message.data()),
            redelivery=message.redelivery_count(),
            **common,
        )
        self.last_receive = time.monotonic()
        try:
            consumer.acknowledge(message)
        except pulsar.PulsarException as exc:
            self.events.write("disconnect", self.endpoint.cluster, error=f"ack: {exc}", **common)
            return
        self.events.write("ack", self.endpoint.cluster, **common)

    def _subscribe(self, endpoint: Endpoint) -> tuple[pulsar.Client | None, pulsar.Consumer | None]:
        client = _client(endpoint)
        try:
            consumer = client.subscribe(
                self.settings.topic,
                self.settings.subscription,
                consumer_type=SUBSCRIPTION_TYPES[self.settings.subscription_type],
                consumer_name=self.client_id,
                initial_position=pulsar.InitialPosition.Earliest,
                replicate_subscription_state_enabled=self.settings.replicate_subscription_state,
            )
        except pulsar.PulsarException as exc:
            self.events.write("disconnect", endpoint.cluster, subscription=self.settings.subscription,
                              error=f"subscribe: {exc}")  # fmt: skip
            client.close()
            return None, None
        self.events.write("connect", endpoint.cluster, subscription=self.settings.subscription)
        return client, consumer

    def _requested_cluster(self) -> Endpoint | None:
        path = self.settings.control_file
        if path is None or not path.exists():
            return None
        try:
            wanted = json.loads(path.read_text()).get("cluster")
        except (OSError, ValueError):
            return None
        return self.settings.endpoints.get(wanted) if wanted else None

    def _close(self, client: pulsar.Client | None, consumer: pulsar.Consumer | None) -> None:
        for closable in (consumer, client):
            if closable is not None:
                try:
                    closable.close()
                except pulsar.PulsarException:
                    log.debug("close failed", exc_info=True)
