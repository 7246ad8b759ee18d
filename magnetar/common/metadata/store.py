"""The metadata-store contract (architecture §4): what every backend provides and every component uses.

Paths are ZooKeeper-style (``/ledgers/00000001``). Values are bytes; callers own their encoding.
Versions start at 0 on create and grow by one on every put, as ZooKeeper's ``Stat.version``.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


class MetadataError(Exception):
    """Base of every metadata-store failure; ``path`` names the node involved."""

    def __init__(self, path: str, message: str | None = None) -> None:
        self.path = path
        super().__init__(message or f"{type(self).__name__}: {path}")


class NoNodeError(MetadataError):
    """The node (or, for create, its parent) does not exist."""


class NodeExistsError(MetadataError):
    """Create of a node that already exists."""


class BadVersionError(MetadataError):
    """Compare-and-set failed: the node's version is not the expected one."""


class NotEmptyError(MetadataError):
    """Delete of a node that still has children."""


class SessionExpiredError(MetadataError):
    """The store session ended; its ephemeral nodes are gone and the handle must be reopened."""


@dataclass(frozen=True)
class Stat:
    version: int
    ephemeral: bool
    created_ms: int
    modified_ms: int


class EventType(enum.Enum):
    CREATED = "created"
    CHANGED = "changed"
    DELETED = "deleted"
    CHILDREN = "children"


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    path: str


class SessionState(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"  # connection lost, session may still be alive
    EXPIRED = "expired"  # session gone: ephemerals deleted, leadership lost


WatchCallback = Callable[[WatchEvent], Awaitable[None] | None]
SessionCallback = Callable[[SessionState], Awaitable[None] | None]


class MetadataStore(abc.ABC):
    """Asynchronous key/value tree with versions, ephemerals, sequential nodes and watches.

    Watches are persistent until ``unwatch`` (unlike ZooKeeper's one-shot watches): the backend
    re-arms them. Callbacks run on the event loop that opened the store; they may be coroutines.
    """

    @abc.abstractmethod
    async def get(self, path: str) -> tuple[bytes, Stat]:
        """Value and stat of ``path``; raises NoNodeError."""

    @abc.abstractmethod
    async def exists(self, path: str) -> Stat | None: ...

    @abc.abstractmethod
    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = True,
    ) -> str:
        """Create ``path`` and return the created path (with the sequence suffix if sequential:
        ten zero-padded digits, as ZooKeeper). Raises NodeExistsError, or NoNodeError when the
        parent is missing and ``make_parents`` is false. Ephemeral nodes vanish with the session."""

    @abc.abstractmethod
    async def put(self, path: str, value: bytes, *, expected_version: int | None = None) -> Stat:
        """Set the value of ``path``.

        ``expected_version`` None: unconditional; creates the node (and parents) if missing.
        ``-1``: the node must not exist (create). ``n >= 0``: compare-and-set against version n;
        raises BadVersionError on mismatch and NoNodeError if the node is missing.
        """

    @abc.abstractmethod
    async def delete(
        self, path: str, *, expected_version: int | None = None, recursive: bool = False
    ) -> None:
        """Delete ``path``; raises NoNodeError, BadVersionError, NotEmptyError."""

    @abc.abstractmethod
    async def children(self, path: str) -> list[str]:
        """Names (not paths) of the children of ``path``, sorted; raises NoNodeError."""

    @abc.abstractmethod
    def watch(self, path: str, callback: WatchCallback, *, children: bool = False) -> None:
        """Call ``callback`` on every change of the node (or, with ``children``, of its child list)."""

    @abc.abstractmethod
    def unwatch(self, path: str, callback: WatchCallback) -> None: ...

    @abc.abstractmethod
    def on_session_event(self, callback: SessionCallback) -> None:
        """Call ``callback`` on every session state change."""

    @property
    @abc.abstractmethod
    def session_id(self) -> int: ...

    @abc.abstractmethod
    def election(self, path: str, identity: str) -> LeaderElection:
        """A leader election among all store clients using ``path``."""

    @abc.abstractmethod
    async def close(self) -> None:
        """End the session (ephemerals go at once) and release resources."""

    async def __aenter__(self) -> MetadataStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class LeaderElection(abc.ABC):
    """Leader election through ephemeral sequential nodes; leadership ends with the session."""

    @abc.abstractmethod
    async def campaign(self) -> None:
        """Join the election and return once this participant is the leader."""

    @abc.abstractmethod
    async def resign(self) -> None: ...

    @property
    @abc.abstractmethod
    def is_leader(self) -> bool: ...

    @abc.abstractmethod
    async def leader(self) -> str | None:
        """Identity of the current leader, if any."""
