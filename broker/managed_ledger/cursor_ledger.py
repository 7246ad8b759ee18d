"""A durable cursor's state in a cursor ledger of its own, as Pulsar's ManagedCursorImpl keeps it.

Acknowledgements are appended to the cursor ledger on the bookies, one entry per flush holding
the whole state (``CursorState.encode``), so acking never writes the metadata store: its write
rate no longer grows with subscriptions times ack rate, and acks keep being persisted while the
store is unreachable. The cursor's node (``/managed-ledgers/<ledger>/cursors/<cursor>``, Pulsar's
ManagedCursorInfo) holds only

    {"cursors_ledger": <ledger id, -1: none>, "mark_delete": [l, e], "ranges": [[l, e, l, e]...],
     "properties": {...}, "writer": <this owner>, "closed": true (only when written by a close)}

where the position is a snapshot, the fallback when the named ledger has no entries (or when
there is none). The node is written with compare-and-set only when the cursor ledger changes
(rollover, the first write after an open), at the takeover of an open and at close.

- Recovery (``load``): read the node; if it names a ledger, open it with recovery (fencing the
  previous owner's writer) and take its last entry; an empty or missing ledger means the
  snapshot. A node written by its owner's close (``closed``) holds that owner's last state, and
  the owner appends no more: its snapshot is taken without opening the ledger (a round trip to
  the store and one to a bookie, per cursor, when a bundle of many topics is unloaded and loaded
  again). The node is then rewritten as ours, so a deposed owner's next node write fails.
- Ledgers are created lazily, as Pulsar does (its NoLedger state): the first save after an open
  creates one. Rollover (``managed_ledger_cursor_max_entries_per_ledger`` entries or
  ``managed_ledger_cursor_rollover_time_in_seconds``): create a ledger, write the state into it,
  record its id in the node, then delete the old ledger. A rollover that cannot record its ledger
  (the store is down) keeps appending to the old one.
- Close: the last state goes to the ledger, then a snapshot to the node, marked closed (still
  naming the ledger, whose last entry is the same state; written even when unchanged); a state
  the ledger could not take is recorded in the node alone, which then names no ledger.
- A node written before cursor ledgers existed has no ``cursors_ledger``: it is a snapshot.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from magnetar.bookie.client import (
    BKError,
    LedgerClient,
    LedgerFencedError,
    LedgerHandle,
    NoSuchLedgerError,
)
from magnetar.broker.managed_ledger.config import ManagedLedgerConfig
from magnetar.broker.managed_ledger.cursor_storage import CursorState
from magnetar.broker.managed_ledger.errors import ManagedLedgerError, ManagedLedgerFencedError
from magnetar.broker.managed_ledger.ledger_deletion import delete_ledger
from magnetar.broker.managed_ledger.meta_store import NodeWriter, cursor_path
from magnetar.common.metadata import (
    BadVersionError,
    MetadataError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
)

log = logging.getLogger(__name__)

NO_LEDGER = -1
_TAKEOVER_ATTEMPTS = 5


class LedgerCursorStorage:
    """The ``CursorStorage`` of an owner's durable cursor: its cursor ledger and its node."""

    def __init__(
        self,
        store: MetadataStore,
        client: LedgerClient,
        ledger_name: str,
        cursor: str,
        config: ManagedLedgerConfig,
        fenced: Callable[[str], ManagedLedgerFencedError],
    ) -> None:
        """``fenced``: marks the managed ledger deposed and makes the error to raise."""
        self._store = store
        self._client = client
        self._ledger_name = ledger_name
        self._cursor = cursor
        self._config = config
        self._fenced = fenced
        self._node = NodeWriter(store, cursor_path(ledger_name, cursor))
        #: in the node: another owner's content always differs, so a lost answer is told apart
        self._writer_id = uuid.uuid4().hex[:16]
        #: the ledger this owner appends to (None until the first save after an open)
        self._handle: LedgerHandle | None = None
        self._handle_created = 0.0
        #: the ledger the node names that this owner does not write: a previous owner's (kept
        #: until a new one is recorded) or one whose writer failed
        self._named = NO_LEDGER
        #: whether the node's snapshot is the latest state (no entry appended since it was written)
        self._node_current = False

    def __repr__(self) -> str:
        return f"cursor {self._cursor} of {self._ledger_name}"

    @property
    def ledger_id(self) -> int:
        """The cursor ledger the node names (-1: none)."""
        return self._handle.ledger_id if self._handle is not None else self._named

    # -- the node -------------------------------------------------------------------------------
    def _node_doc(self, ledger_id: int, state: CursorState, *, closed: bool = False) -> bytes:
        doc: dict[str, Any] = {"cursors_ledger": ledger_id, **state.to_doc(), "writer": self._writer_id}
        if closed:
            doc["closed"] = True
        return json.dumps(doc, separators=(",", ":")).encode()

    async def _write_node(self, ledger_id: int, state: CursorState, *, closed: bool = False) -> None:
        try:
            await self._node.write(self._node_doc(ledger_id, state, closed=closed))
            self._node_current = True
        except (BadVersionError, NoNodeError) as exc:
            raise self._fenced(f"cursor {self._cursor} was rewritten by another broker") from exc
        except MetadataError as exc:
            raise ManagedLedgerError(f"cannot persist {self!r} in the metadata store: {exc}") from exc

    # -- CursorStorage --------------------------------------------------------------------------
    async def create(self, state: CursorState) -> CursorState | None:
        self._node.version = -1
        try:
            await self._node.write(self._node_doc(NO_LEDGER, state))
        except (NodeExistsError, BadVersionError):
            return await self.load()
        except MetadataError as exc:
            raise ManagedLedgerError(f"cannot create {self!r}: {exc}") from exc
        self._node_current = True
        return None

    async def load(self) -> CursorState | None:
        for _ in range(_TAKEOVER_ATTEMPTS):
            try:
                data, stat = await self._store.get(self._node.path)
            except NoNodeError:
                return None
            except MetadataError as exc:
                raise ManagedLedgerError(f"cannot read {self!r}: {exc}") from exc
            ledger_id, state, closed = self._decode_node(data)
            recovered = await self._recover(ledger_id) if ledger_id != NO_LEDGER and not closed else None
            if recovered is not None:
                state = recovered
            elif ledger_id != NO_LEDGER and not closed:
                await delete_ledger(self._client, self._ledger_name, ledger_id)  # empty: snapshot
                ledger_id = NO_LEDGER
            self._node.version = stat.version
            try:  # rewritten as ours: a previous owner's next node write conflicts and fences it
                await self._node.write(self._node_doc(ledger_id, state))
            except BadVersionError:
                continue  # the previous owner wrote one last time: read that
            except MetadataError as exc:
                raise ManagedLedgerError(f"cannot take {self!r} over: {exc}") from exc
            self._named, self._node_current = ledger_id, True
            return state
        raise ManagedLedgerError(f"{self!r} keeps changing under us")

    def _decode_node(self, data: bytes) -> tuple[int, CursorState, bool]:
        """(the ledger named, the snapshot, whether its owner's close wrote it)"""
        try:
            doc = json.loads(data)
            ledger_id = int(doc.get("cursors_ledger", NO_LEDGER))  # absent: written before ledgers
            closed = doc.get("closed") is True
        except (ValueError, TypeError, AttributeError) as exc:
            raise ManagedLedgerError(f"{self!r} is unreadable: {exc}") from exc
        return ledger_id, CursorState.from_doc(doc, repr(self)), closed

    async def _recover(self, ledger_id: int) -> CursorState | None:
        """The last state in ``ledger_id``, fenced first (None: the ledger is empty or gone)."""
        try:
            handle = await self._client.open_ledger(ledger_id)
            last = handle.last_add_confirmed
            if last < 0:
                return None
            entry = await handle.read_entry(last)
        except NoSuchLedgerError:
            log.warning("%r: cursor ledger %d is gone, using the node's snapshot", self, ledger_id)
            return None
        except BKError as exc:
            raise ManagedLedgerError(f"cannot recover {self!r} from ledger {ledger_id}: {exc}") from exc
        return CursorState.decode(entry.payload, f"{self!r}, entry {ledger_id}:{last}")

    async def save(self, state: CursorState) -> None:
        handle = self._handle
        if handle is None:
            await self._switch(state)
            return
        if self._needs_rollover(handle):
            try:
                await self._switch(state)
                return
            except ManagedLedgerFencedError:
                raise
            except ManagedLedgerError as exc:
                # The current ledger still takes entries: a rollover can wait, acks cannot.
                log.warning("%r: cursor ledger rollover postponed: %s", self, exc)
        await self._append(handle, state)

    def _needs_rollover(self, handle: LedgerHandle) -> bool:
        entries = handle.last_add_confirmed + 1
        if entries >= self._config.cursor_max_entries_per_ledger:
            return True
        limit = self._config.cursor_rollover_time_seconds
        return entries > 0 and limit > 0 and time.monotonic() - self._handle_created >= limit

    async def _append(self, handle: LedgerHandle, state: CursorState) -> None:
        try:
            await handle.add_entry(state.encode())
            self._node_current = False
        except LedgerFencedError as exc:
            raise self._fenced(
                f"cursor {self._cursor} was rewritten by another broker (its ledger was fenced)"
            ) from exc
        except BKError as exc:
            # The ledger stays named until the next save records a new one (its entries are
            # still what recovery reads).
            self._handle, self._named = None, handle.ledger_id
            await self._close_quietly(handle)
            raise ManagedLedgerError(f"cannot persist {self!r} in its ledger: {exc}") from exc

    async def _switch(self, state: CursorState) -> None:
        """Create a ledger holding ``state``, record it in the node, then delete the old one."""
        try:
            handle = await self._client.create_ledger(
                self._config.ensemble_size,
                self._config.write_quorum,
                self._config.ack_quorum,
                custom={"managed-ledger": self._ledger_name, "cursor": self._cursor},
            )
            await handle.add_entry(state.encode())
        except BKError as exc:
            raise ManagedLedgerError(f"cannot create a ledger for {self!r}: {exc}") from exc
        try:
            await self._write_node(handle.ledger_id, state)
        except ManagedLedgerError:
            # Not named by the node (or, after a lost answer, named along with a snapshot equal
            # to its only entry): it can go.
            await self._close_quietly(handle)
            await delete_ledger(self._client, self._ledger_name, handle.ledger_id)
            raise
        old, old_named = self._handle, self._named
        self._handle, self._handle_created, self._named = handle, time.monotonic(), NO_LEDGER
        log.info("%r: writing to cursor ledger %d", self, handle.ledger_id)
        if old is not None:
            await self._close_quietly(old)
            await delete_ledger(self._client, self._ledger_name, old.ledger_id)
        if old_named != NO_LEDGER:
            await delete_ledger(self._client, self._ledger_name, old_named)

    async def close(self, state: CursorState, changed: bool) -> None:
        handle, in_ledger = self._handle, self.ledger_id != NO_LEDGER
        if changed:
            in_ledger = False
            if handle is not None:
                try:
                    await self._append(handle, state)
                    in_ledger = True
                except ManagedLedgerFencedError:
                    raise
                except ManagedLedgerError as exc:
                    log.warning("%r: last state not in the cursor ledger, only in the node: %s", self, exc)
        if changed or not self._node_current or in_ledger:
            # This owner's last state: the ledger gets no entry after it (the flush lock is held,
            # and a closed cursor saves no more). Written even when the node holds it already
            # but names a ledger: marked closed, the next open need not read that ledger (one
            # write, sent with the bundle's others, against a store read and a bookie read).
            await self._write_node(self.ledger_id if in_ledger else NO_LEDGER, state, closed=True)
        if handle is not None and self._handle is handle:
            self._handle, self._named = None, handle.ledger_id
            await self._close_quietly(handle)
        if not in_ledger and self._named != NO_LEDGER:  # the node no longer names it
            await delete_ledger(self._client, self._ledger_name, self._named)
            self._named = NO_LEDGER

    async def delete(self) -> None:
        doomed = {self.ledger_id}
        with contextlib.suppress(MetadataError, ManagedLedgerError):
            data, _ = await self._store.get(self._node.path)
            doomed.add(self._decode_node(data)[0])
        with contextlib.suppress(NoNodeError):
            await self._store.delete(self._node.path)
        if self._handle is not None:
            await self._close_quietly(self._handle)
            self._handle = None
        self._named = NO_LEDGER
        for ledger_id in doomed - {NO_LEDGER}:
            await delete_ledger(self._client, self._ledger_name, ledger_id)

    async def _close_quietly(self, handle: LedgerHandle) -> None:
        with contextlib.suppress(BKError, MetadataError):
            await handle.close()
