"""Compaction of a topic (Pulsar's two-phase compactor): read the topic up to its last entry
(the horizon), find the latest message of every key (a message with an empty value deletes its
key), write the entries holding them to a new compacted ledger, then record that ledger and the
horizon in the ``__compaction`` cursor (the cursor's mark-delete is the horizon, so what follows it
is kept for the next compaction). The previous compacted ledger is deleted once the new one is
recorded. Messages without a key are not kept; a batch is cut down to its latest values (at its
original position, with new batch indexes, as Pulsar re-batches); a batch whose messages cannot be
read (compressed) is kept whole.
"""

from __future__ import annotations

import contextlib
import logging

from magnetar.bookie.client import BKError, LedgerClient
from magnetar.broker.compaction import compacted_ledger
from magnetar.broker.compaction.keys import KeyedMessage, messages_of, rebatch
from magnetar.broker.compaction.view import CompactedView
from magnetar.broker.managed_ledger import Entry, InitialPosition, Position, TopicLedger

log = logging.getLogger(__name__)

CURSOR = "__compaction"
#: the __compaction cursor's property naming the compacted ledger (Pulsar's name)
LEDGER_PROPERTY = "CompactedTopicLedger"
_READ_CHUNK = 500


class CompactionError(Exception):
    """A compaction that cannot be done (nothing keyed to compact, storage unreachable)."""


async def compact(ledger: TopicLedger, client: LedgerClient, topic: str) -> CompactedView:
    """Compact the topic stored in ``ledger``; the new view."""
    horizon = ledger.last_confirmed_entry
    entries = await _read_through(ledger, horizon)
    kept, keyed = _latest_per_key(entries)
    if entries and not keyed:
        raise CompactionError(f"{topic} has no message with a key: there is nothing to compact")
    cursor = ledger.cursors.get(CURSOR) or await ledger.open_cursor(CURSOR, InitialPosition.EARLIEST)
    previous = cursor.properties.get(LEDGER_PROPERTY)
    ledger_id = await compacted_ledger.write(client, topic, kept)
    mark = horizon if horizon is not None else ledger.before_first()
    await cursor.mark_delete(mark, {**cursor.properties, LEDGER_PROPERTY: ledger_id})
    await cursor.flush()
    if previous is not None:
        with contextlib.suppress(BKError):
            await client.delete_ledger(previous)
    log.info(
        "%s: compacted %d entries to %d (ledger %d) up to %s", topic, len(entries), len(kept), ledger_id, mark
    )
    return CompactedView(mark, ledger_id, kept)


async def load(ledger: TopicLedger, client: LedgerClient) -> CompactedView:
    """The view the ``__compaction`` cursor records (empty when the topic was never compacted)."""
    cursor = ledger.cursors.get(CURSOR)
    ledger_id = cursor.properties.get(LEDGER_PROPERTY) if cursor is not None else None
    if cursor is None or ledger_id is None:
        return CompactedView()
    return CompactedView(
        cursor.mark_delete_position, ledger_id, await compacted_ledger.read(client, ledger_id)
    )


async def _read_through(ledger: TopicLedger, last: Position | None) -> list[Entry]:
    found: list[Entry] = []
    position = ledger.first_position()
    while last is not None and position <= last:
        chunk = [e for e in await ledger.read_entries(position, _READ_CHUNK) if e.position <= last]
        if not chunk:
            break
        found += chunk
        position = ledger.next_position(chunk[-1].position)
    return found


def _latest_per_key(entries: list[Entry]) -> tuple[list[Entry], bool]:
    """The entries to keep, in order (a batch cut down to its latest values), and whether any
    message had a key."""
    latest: dict[str, tuple[Position, int]] = {}
    batches: dict[Position, list[KeyedMessage]] = {}
    opaque: set[Position] = set()
    keyed = False
    for entry in entries:
        messages = messages_of(entry.data)
        if messages is None:
            opaque.add(entry.position)
            continue
        batches[entry.position] = messages
        for index, message in enumerate(messages):
            if message.key is None:
                continue
            keyed = True
            if message.deletes:
                latest.pop(message.key, None)
            else:
                latest[message.key] = (entry.position, index)
    kept_messages: dict[Position, set[int]] = {}
    for position, index in latest.values():
        kept_messages.setdefault(position, set()).add(index)
    kept = []
    for entry in entries:
        if entry.position in opaque:
            kept.append(entry)
        elif entry.position in kept_messages:
            indexes = kept_messages[entry.position]
            whole = len(indexes) == len(batches[entry.position])
            kept.append(entry if whole else Entry(entry.position, rebatch(entry.data, indexes)))
    return kept, keyed
