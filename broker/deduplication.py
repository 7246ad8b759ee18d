"""Message deduplication by producer name and sequence id (Pulsar's MessageDeduplication).

When ``broker_deduplication_enabled`` is set, a send whose sequence id is at or below the highest
one already persisted for its producer name is answered as a duplicate (a receipt, nothing
stored). The state survives broker restarts the way Pulsar keeps it: a snapshot of the highest
sequence id per producer is stored as the properties of the ``pulsar.dedup`` cursor every
``snapshot_interval`` entries (``brokerDeduplicationEntriesInterval``, 1000) and at close; on load
the entries after the snapshot are read back and their MessageMetadata replayed.
"""

from __future__ import annotations

import enum
import logging

from magnetar.broker.managed_ledger import ManagedCursor, Position, TopicLedger
from magnetar.broker.protocol.frames import FrameError, read_metadata
from magnetar.common.background import BackgroundTasks
from magnetar.proto import PulsarApi_pb2 as api

log = logging.getLogger(__name__)

#: the cursor that holds the snapshot (Pulsar's name, so it never collides with a subscription)
CURSOR_NAME = "pulsar.dedup"
#: the cursor of the replicated messages' deduplication state (geo-replication)
REPLICATED_CURSOR_NAME = "pulsar.dedup.replicated"
#: entries read per round while replaying the log after the snapshot
_REPLAY_BATCH = 500


class Status(enum.Enum):
    NEW = "new"
    DUPLICATE = "duplicate"
    #: at or below a sequence id still being written: the answer waits for that write
    IN_FLIGHT = "in-flight"


#: message property a replicator adds: the message's position in its origin cluster's topic,
#: ``ledgerId:entryId`` (Pulsar's name and format)
SOURCE_POSITION = "__MSG_PROP_REPL_SOURCE_POSITION"


def encode_position(ledger_id: int, entry_id: int) -> int:
    """A position as one increasing number (entry ids stay below 2**32)."""
    return (ledger_id << 32) | entry_id


def source_position(metadata: api.MessageMetadata) -> int | None:
    """The encoded origin position of a replicated message, None when it carries none."""
    for prop in metadata.properties:
        if prop.key == SOURCE_POSITION:
            ledger, _, entry = prop.value.partition(":")
            try:
                return encode_position(int(ledger), int(entry))
            except ValueError:
                return None
    return None


def replicated_identity(metadata: api.MessageMetadata) -> tuple[str, int]:
    """How a replicated message is recognised when it comes again: its origin cluster and its
    position there (set by the replicator, increasing in the origin's topic), so a resend after
    a reconnection or a restart of either side is stored once, and a producer that restarts its
    sequence ids under the same name loses nothing. Without the property (a replicator of
    another implementation), the origin producer and its sequence id, as Pulsar does."""
    position = source_position(metadata)
    if position is not None:
        return metadata.replicated_from, position
    return f"{metadata.replicated_from}/{metadata.producer_name}", metadata.sequence_id


class Deduplication:
    def __init__(
        self,
        ledger: TopicLedger,
        *,
        snapshot_interval: int = 1000,
        cursor_name: str = CURSOR_NAME,
        replicated_only: bool = False,
    ) -> None:
        self._ledger = ledger
        self._cursor_name = cursor_name
        #: geo-replication's instance: only messages with ``replicated_from``, by ``replicated_identity``
        self._replicated_only = replicated_only
        self._snapshot_interval = snapshot_interval
        self._cursor: ManagedCursor | None = None
        #: highest sequence id handed to the ledger / confirmed stored, per producer name
        self.pushed: dict[str, int] = {}
        self.persisted: dict[str, int] = {}
        self._since_snapshot = 0
        self._last_position: Position | None = None
        self._tasks = BackgroundTasks()

    async def recover(self) -> None:
        """Load the snapshot and replay what was written after it."""
        cursor = await self._ledger.open_cursor(self._cursor_name)
        self._cursor = cursor
        self.persisted = {name: int(seq) for name, seq in cursor.properties.items()}
        position = self._ledger.next_position(cursor.mark_delete_position)
        replayed = 0
        while True:
            entries = await self._ledger.read_entries(position, _REPLAY_BATCH)
            if not entries:
                break
            for entry in entries:
                try:
                    metadata = read_metadata(entry.data)
                except FrameError:
                    continue
                highest = max(metadata.highest_sequence_id, metadata.sequence_id)
                if not self._replicated_only:
                    self._persist(metadata.producer_name, highest)
                elif metadata.HasField("replicated_from"):
                    self._persist(*replicated_identity(metadata))
            replayed += len(entries)
            self._last_position = entries[-1].position
            position = self._ledger.next_position(entries[-1].position)
        self.pushed = dict(self.persisted)
        if replayed:
            log.info("%s: deduplication state rebuilt from %d entries", self._ledger.name, replayed)
            await self.snapshot()

    def check(self, producer: str, sequence_id: int, highest_sequence_id: int) -> Status:
        """Classify a send and, when new, remember it as pushed."""
        if sequence_id <= self.pushed.get(producer, -1):
            if sequence_id <= self.persisted.get(producer, -1):
                return Status.DUPLICATE
            return Status.IN_FLIGHT
        self.pushed[producer] = max(highest_sequence_id, sequence_id)
        return Status.NEW

    def is_persisted(self, producer: str, sequence_id: int) -> bool:
        return sequence_id <= self.persisted.get(producer, -1)

    def last_sequence_id(self, producer: str) -> int:
        return self.persisted.get(producer, -1)

    def stored(self, producer: str, highest_sequence_id: int, position: Position) -> None:
        """A send reached the ledger: remember it, and snapshot every so many entries."""
        self._persist(producer, highest_sequence_id)
        self._last_position = position
        self._since_snapshot += 1
        if self._since_snapshot >= self._snapshot_interval and self._cursor is not None:
            self._since_snapshot = 0
            self._tasks.spawn(self._mark(position, dict(self.persisted)))

    async def _mark(self, position: Position, state: dict[str, int]) -> None:
        assert self._cursor is not None
        try:
            # Recorded at once; written with the cursor's batched persistence.
            await self._cursor.mark_delete(position, state)
        except Exception as exc:  # the next snapshot covers it, and the replay covers the gap
            log.warning("%s: deduplication snapshot failed: %s", self._ledger.name, exc)

    def _persist(self, producer: str, sequence_id: int) -> None:
        if sequence_id > self.persisted.get(producer, -1):
            self.persisted[producer] = sequence_id

    async def snapshot(self) -> None:
        """Store the current state now (at close, and after a replay)."""
        if self._cursor is None:
            return
        self._cursor.properties.update(self.persisted)
        if self._last_position is not None:
            await self._cursor.mark_delete(self._last_position, dict(self.persisted))
        await self._cursor.flush()
