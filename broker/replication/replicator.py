"""One topic's replicator to one remote cluster (Pulsar's PersistentReplicator).

A durable cursor ``pulsar.repl.<remote>`` on the topic's managed ledger marks what the remote
has confirmed. The replicator reads after it, sets ``replicated_from`` to the local cluster in
each entry's MessageMetadata (the payload, batches and compression pass through unchanged),
and sends it with a producer named ``pulsar.repl.<local>`` on the remote cluster's topic. The
cursor moves only when the remote's receipt comes back, in order, so nothing is skipped.

Entries that already carry ``replicated_from`` came from another cluster and are not sent on
(every cluster replicates only its own messages, to every other: loops are impossible).

When anything fails (remote down, producer closed by an unload or transfer there, send error)
the replicator drops its session, waits (backoff 100 ms doubling to 60 s) and resends from its
cursor; the remote drops what it had already stored: each message carries its position here in
the property ``__MSG_PROP_REPL_SOURCE_POSITION`` (see ``deduplication.replicated_identity``).

The producer authenticates with the broker's own client credentials and, on TLS, speaks
``pulsar+ssl://`` (``remote_access.RemoteAccess``); a remote that refuses the credentials is
named in ``last_error`` and the log, and retried with the same backoff (a fixed token or a
restarted remote may let it in).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, NamedTuple

from magnetar.broker.deduplication import SOURCE_POSITION
from magnetar.broker.managed_ledger import Entry, InitialPosition, ManagedCursor, ManagedLedgerError, Position
from magnetar.broker.protocol.frames import FrameError, payload_section, read_metadata
from magnetar.broker.replication.producer import (
    ProducerBrokenError,
    RemoteAuthenticationError,
    RemoteProducer,
)
from magnetar.broker.replication.remote_access import RemoteAccess
from magnetar.common.tls import TlsSettingsError

if TYPE_CHECKING:
    from magnetar.broker.topic import Topic

log = logging.getLogger(__name__)

#: cursor and producer names of replication, as in Pulsar
CURSOR_PREFIX = "pulsar.repl."
_BACKOFF_START_S = 0.1
_BACKOFF_MAX_S = 60.0
_READ_BATCH = 100


def cursor_name(remote_cluster: str) -> str:
    return f"{CURSOR_PREFIX}{remote_cluster}"


class Rewritten(NamedTuple):
    data: bytes
    messages: int
    marker: bool
    publish_time: int  # ms


def rewrite_for_replication(
    data: bytes, local_cluster: str, remote_cluster: str, position: Position
) -> Rewritten | None:
    """The entry with ``replicated_from`` set and its ``position`` here as a property (the
    payload untouched), its number of messages, whether it is a marker and when it was
    published; None when it is not for ``remote_cluster``: it came from another cluster, or its
    ``replicate_to`` names other clusters (PIP-33 responses and local snapshots)."""
    metadata = read_metadata(data)
    if metadata.HasField("replicated_from"):
        return None
    if metadata.replicate_to and remote_cluster not in metadata.replicate_to:
        return None
    start = 6 if data[:2] == b"\x0e\x01" else 0
    size = int.from_bytes(data[start : start + 4], "big")
    payload = data[start + 4 + size :]
    metadata.replicated_from = local_cluster
    metadata.properties.add(key=SOURCE_POSITION, value=f"{position.ledger_id}:{position.entry_id}")
    marker = metadata.HasField("marker_type")
    return Rewritten(
        payload_section(metadata, payload),
        max(1, metadata.num_messages_in_batch),
        marker,
        metadata.publish_time,
    )


class _Confirmation(NamedTuple):
    position: Position
    future: asyncio.Future[tuple[int, int]] | None  # None: nothing sent (not for the remote)
    messages: int
    size: int
    publish_time: int  # ms


async def _put(
    queue: asyncio.Queue[_Confirmation], item: _Confirmation, confirmer: asyncio.Task[None]
) -> None:
    """Queue a send to confirm, waiting for room (at most ``queue_size`` unconfirmed); raises
    why the session broke if the confirmer stopped meanwhile."""
    if not queue.full():
        queue.put_nowait(item)
        return
    put = asyncio.ensure_future(queue.put(item))
    await asyncio.wait([put, confirmer], return_when=asyncio.FIRST_COMPLETED)
    if not put.done():
        put.cancel()
        confirmer.result()
        raise ProducerBrokenError("confirmations stopped")


class Replicator:
    def __init__(
        self,
        topic: Topic,
        local_cluster: str,
        remote_cluster: str,
        remote_service_url: str,
        *,
        queue_size: int = 1000,
        remote_listener_name: str = "",
        access: RemoteAccess | None = None,
    ) -> None:
        """``access``: the credentials and TLS settings the remote is reached with."""
        self.topic = topic
        self.access = access or RemoteAccess()
        self.local_cluster = local_cluster
        self.remote_cluster = remote_cluster
        self.remote_service_url = remote_service_url
        self.remote_listener_name = remote_listener_name
        self.queue_size = queue_size
        self.cursor: ManagedCursor | None = None
        self.producer: RemoteProducer | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        #: messages and bytes the remote confirmed (for rates and the stats)
        self.messages_out = 0
        self.bytes_out = 0
        #: PIP-33 markers sent (not in the message counters)
        self.markers_out = 0
        self._rate_mark = (time.monotonic(), 0, 0)
        self._rates = (0.0, 0.0)
        self.last_error = ""
        #: publish time (ms) of the oldest message sent and not yet confirmed by the remote
        self._oldest_unconfirmed_ms: int | None = None

    async def start(self) -> None:
        # Earliest for a new cursor: a topic that existed before its namespace was replicated
        # has its earlier messages sent too (nothing written after the policy change is missed).
        self.cursor = await self.topic.ledger.open_cursor(
            cursor_name(self.remote_cluster), InitialPosition.EARLIEST
        )
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replicator-{self.topic.name}-{self.remote_cluster}"
        )

    # -- the loop -------------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = _BACKOFF_START_S
        while not self._closed:
            producer: RemoteProducer | None = None
            try:
                producer = self.producer = self._new_producer()
                await producer.connect()
                log.info("replicator %s -> %s connected", self.topic.name, self.remote_cluster)
                backoff = _BACKOFF_START_S
                self.last_error = ""
                await self._replicate(producer)
            except asyncio.CancelledError:
                raise
            except RemoteAuthenticationError as exc:
                self.last_error = (
                    f"remote cluster {self.remote_cluster} refused the replicator's credentials: {exc}"
                )
                log.warning("replicator %s -> %s: %s", self.topic.name, self.remote_cluster, self.last_error)
            except (ProducerBrokenError, OSError, TimeoutError, ManagedLedgerError) as exc:
                self.last_error = str(exc) or repr(exc)
                log.info("replicator %s -> %s: %s", self.topic.name, self.remote_cluster, self.last_error)
            except Exception as exc:
                self.last_error = repr(exc)
                log.exception("replicator %s -> %s failed", self.topic.name, self.remote_cluster)
            finally:
                if producer is not None:
                    await producer.close()
            if self.closed:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

    def _new_producer(self) -> RemoteProducer:
        """This session's producer; ProducerBrokenError when the broker's client TLS files
        cannot be used (retried: they may be being renewed)."""
        try:
            tls = self.access.ssl_context()
        except TlsSettingsError as exc:
            raise ProducerBrokenError(f"the broker's client TLS settings cannot be used: {exc}") from None
        return RemoteProducer(
            self.remote_service_url,
            str(self.topic.name),
            f"{CURSOR_PREFIX}{self.local_cluster}",
            listener_name=self.remote_listener_name,
            credentials=self.access.credentials,
            tls=tls,
        )

    async def _replicate(self, producer: RemoteProducer) -> None:
        """Send from the cursor on until the session breaks; receipts move the cursor in order."""
        cursor = self.cursor
        assert cursor is not None
        cursor.rewind()  # what was sent and not confirmed goes again
        confirmations: asyncio.Queue[_Confirmation] = asyncio.Queue(maxsize=self.queue_size)
        confirmer = asyncio.get_running_loop().create_task(self._confirm(confirmations))
        sequence = 0
        reading: asyncio.Future[list[Entry]] | None = None
        try:
            while True:
                reading = asyncio.ensure_future(cursor.read_entries_or_wait(_READ_BATCH))
                await asyncio.wait([reading, confirmer], return_when=asyncio.FIRST_COMPLETED)
                if confirmer.done():
                    confirmer.result()  # raises why the session broke
                    return
                entries: list[Entry] = reading.result()
                for entry in entries:
                    try:
                        rewritten = rewrite_for_replication(
                            entry.data, self.local_cluster, self.remote_cluster, entry.position
                        )
                    except (FrameError, ValueError) as exc:
                        log.warning("replicator %s: entry %s unreadable (%s): skipped", self.topic.name,
                                    entry.position, exc)  # fmt: skip
                        rewritten = None
                    if rewritten is None:
                        await _put(confirmations, _Confirmation(entry.position, None, 0, 0, 0), confirmer)
                        continue
                    data, messages, marker, publish_time = rewritten
                    if marker:
                        messages = 0  # counted apart: markers are no user messages
                    # The session's own sequence ids match receipts; the remote deduplicates by
                    # the origin producer's ids, which the metadata keeps.
                    sequence += 1
                    future = producer.send(
                        sequence, data, num_messages=messages, highest_sequence_id=sequence
                    )
                    await _put(
                        confirmations,
                        _Confirmation(entry.position, future, messages, len(data), publish_time),
                        confirmer,
                    )
                await producer.drain()
        finally:
            # A read still waiting (the session broke, or the replicator closes with its topic)
            # is ended here, so its error is not left for the loop to report.
            for task in (reading, confirmer):
                if task is None:
                    continue
                task.cancel()  # nothing when it is done
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _confirm(self, confirmations: asyncio.Queue[_Confirmation]) -> None:
        cursor = self.cursor
        assert cursor is not None
        while True:
            position, future, messages, size, publish_time = await confirmations.get()
            if future is not None:
                # the oldest message the remote has not confirmed (kept if the session breaks:
                # the cursor rewinds to it)
                self._oldest_unconfirmed_ms = publish_time
                await future  # ProducerBrokenError ends the session
                if messages:
                    self.messages_out += messages
                    self.bytes_out += size
                else:
                    self.markers_out += 1
            await cursor.mark_delete(position)
            if confirmations.empty():
                self._oldest_unconfirmed_ms = None

    # -- stats ----------------------------------------------------------------------------------
    @property
    def backlog(self) -> int:
        return 0 if self.cursor is None else self.cursor.number_of_entries_in_backlog

    def delay_seconds(self) -> int:
        """Pulsar's replicationDelayInSeconds: how long the oldest message not yet confirmed by
        the remote has waited since it was published (0 with no backlog)."""
        if self.backlog == 0 or self._oldest_unconfirmed_ms is None:
            return 0
        return max(0, int(time.time() - self._oldest_unconfirmed_ms / 1000))

    @property
    def connected(self) -> bool:
        return self.producer is not None and self.producer.connected

    def rates(self) -> tuple[float, float]:
        """Messages/s and bytes/s confirmed by the remote, over the last second or more."""
        now = time.monotonic()
        then, messages, size = self._rate_mark
        if now - then >= 1.0:
            self._rates = (
                (self.messages_out - messages) / (now - then),
                (self.bytes_out - size) / (now - then),
            )
            self._rate_mark = (now, self.messages_out, self.bytes_out)
        return self._rates

    def stats(self) -> dict[str, object]:
        """Pulsar's ReplicatorStats shape."""
        rate, throughput = self.rates()
        return {
            "msgRateOut": rate,
            "msgThroughputOut": throughput,
            "msgOutCounter": self.messages_out,
            "bytesOutCounter": self.bytes_out,
            "markerMessagesOutCounter": self.markers_out,
            "replicationBacklog": self.backlog,
            "replicationDelayInSeconds": self.delay_seconds(),
            "connected": self.connected,
            "outboundConnection": self.producer.connected_url if self.producer and self.connected else "",
            "lastError": self.last_error,
        }

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self.producer is not None:
            await self.producer.close()
