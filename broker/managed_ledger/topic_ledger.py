"""What a topic needs of its log (architecture §4, "Managed ledgers and cursors").

A topic, its subscriptions, dispatchers and policies, deduplication, compaction, replication and
the admin API's stats all work on this face alone, whichever log is behind it: the owner's
``ManagedLedger``, a non-persistent topic's ``MemoryLedger`` or a PIP-63 read-only owner's
``ReadOnlyManagedLedger``. A log that cannot do something (a durable cursor in memory, a write
at a read-only owner) raises a ``ManagedLedgerError`` for it. Cursors are ``ManagedCursor``s
whatever the log; what a cursor needs of its log in turn is ``cursor.CursorLedger``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from magnetar.broker.managed_ledger.config import ManagedLedgerConfig
from magnetar.broker.managed_ledger.cursor import ManagedCursor
from magnetar.broker.managed_ledger.meta_store import LedgerInfo
from magnetar.broker.managed_ledger.position import Entry, InitialPosition, Position

#: an add's outcome: its position, or the error it failed with
AddCallback = Callable[[Position | None, BaseException | None], None]


class TopicLedger(Protocol):
    # -- identity and settings ------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The managed-ledger name, ``tenant/ns/<domain>/topic``."""
        ...

    #: replaced by the topic's retention policy (policies/topic_settings.py)
    config: ManagedLedgerConfig

    # -- state and stats ------------------------------------------------------------------------
    @property
    def is_fenced(self) -> bool:
        """Another broker took the log over: this instance can no longer write."""
        ...

    @property
    def is_terminated(self) -> bool: ...

    @property
    def last_confirmed_entry(self) -> Position | None: ...

    @property
    def number_of_entries(self) -> int: ...

    @property
    def total_size(self) -> int: ...

    @property
    def ledgers(self) -> list[LedgerInfo]:
        """The ledgers the log is made of (a copy), for stats and backlog sizes."""
        ...

    @property
    def entries_added(self) -> int: ...

    @property
    def bytes_added(self) -> int: ...

    # -- positions ------------------------------------------------------------------------------
    def first_position(self) -> Position: ...

    def before_first(self) -> Position: ...

    def next_position(self, position: Position) -> Position: ...

    def previous_position(self, position: Position) -> Position | None: ...

    def has_entry(self, position: Position) -> bool: ...

    # -- reading and writing --------------------------------------------------------------------
    async def add_entry(self, data: bytes) -> Position: ...

    def add_entry_then(self, data: bytes, done: AddCallback) -> None:
        """Append, as ``add_entry``, and call ``done(position, None)`` once stored or
        ``done(None, error)``: in order with every add before it, and never before this returns
        (a publish's hot path: no task or future awaited per entry)."""

    async def read_entries(
        self, start: Position, max_entries: int, max_bytes: int | None = None
    ) -> list[Entry]: ...

    async def read_entry(self, position: Position) -> Entry | None: ...

    async def find_first_position(self, predicate: Callable[[Entry], bool]) -> Position | None: ...

    # -- cursors --------------------------------------------------------------------------------
    @property
    def cursors(self) -> Mapping[str, ManagedCursor]:
        """The durable cursors, by name."""
        ...

    async def open_cursor(
        self, name: str, initial_position: InitialPosition = InitialPosition.LATEST
    ) -> ManagedCursor: ...

    def new_non_durable_cursor(
        self, start: Position | InitialPosition, *, inclusive: bool = True
    ) -> ManagedCursor: ...

    async def delete_cursor(self, name: str) -> None: ...

    # -- properties (the topic epoch of producer access modes) ----------------------------------
    @property
    def properties(self) -> dict[str, str]: ...

    async def set_property(self, key: str, value: str) -> None: ...

    # -- ending ---------------------------------------------------------------------------------
    async def terminate(self) -> Position | None: ...

    async def close(self) -> None: ...

    async def delete(self) -> None: ...
