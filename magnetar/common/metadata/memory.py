"""In-process metadata store (``memory:`` and ``memory://name``).

A ``MemoryTree`` holds the nodes; every ``MemoryStore`` opened on it is one session with its own
ephemerals and watches, so several components of one process (a broker and its bookie in a test)
see each other's nodes exactly as separate ZooKeeper clients would. Trees are shared by name
within a process; ``memory:`` alone gives a private tree. The file-backed store for
``magnetar standalone`` is this tree with a write-through journal (``sqlite.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from magnetar.common.metadata import paths
from magnetar.common.metadata.election import StoreLeaderElection
from magnetar.common.metadata.store import (
    BadVersionError,
    EventType,
    LeaderElection,
    MetadataError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionCallback,
    SessionExpiredError,
    SessionState,
    Stat,
    WatchCallback,
    WatchEvent,
)
from magnetar.common.metadata.watchers import Watchers


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Node:
    value: bytes
    version: int = 0
    owner: int | None = None  # session id of an ephemeral node
    created_ms: int = field(default_factory=_now_ms)
    modified_ms: int = field(default_factory=_now_ms)
    children: set[str] = field(default_factory=set)
    sequence: int = 0  # next suffix for sequential children

    def stat(self) -> Stat:
        return Stat(self.version, self.owner is not None, self.created_ms, self.modified_ms)


#: a change to persist: (path, node) after a create/put, (path, None) after a delete
Change = tuple[str, Node | None]


class MemoryTree:
    """The nodes, plus the sessions to notify. Thread-safe: stores on different event loops
    (a bookie thread and a broker thread of one process) may share it."""

    def __init__(self, nodes: dict[str, Node] | None = None) -> None:
        self.lock = threading.RLock()
        self.nodes: dict[str, Node] = nodes or {"/": Node(b"")}
        self._sessions: dict[int, MemoryStore] = {}
        self._session_ids = itertools.count(1)

    def new_session(self, store: MemoryStore) -> int:
        with self.lock:
            session = next(self._session_ids)
            self._sessions[session] = store
            return session

    def end_session(self, session: int) -> list[WatchEvent]:
        """Forget the session and delete its ephemerals; returns the events to deliver."""
        with self.lock:
            self._sessions.pop(session, None)
            owned = [p for p, n in self.nodes.items() if n.owner == session]
            events: list[WatchEvent] = []
            for path in sorted(owned, key=len, reverse=True):
                if path in self.nodes:
                    events += self.remove(path)
            return events

    def notify(self, events: list[WatchEvent]) -> None:
        with self.lock:
            stores = list(self._sessions.values())
        for store in stores:
            for event in events:
                store.deliver(event)

    # -- mutations; callers hold the lock -------------------------------------------------------
    def add(self, path: str, value: bytes, owner: int | None) -> list[WatchEvent]:
        node = Node(value, owner=owner)
        self.nodes[path] = node
        parent = paths.parent(path)
        self.nodes[parent].children.add(paths.name(path))
        return [WatchEvent(EventType.CREATED, path), WatchEvent(EventType.CHILDREN, parent)]

    def remove(self, path: str) -> list[WatchEvent]:
        del self.nodes[path]
        parent = paths.parent(path)
        if parent in self.nodes:
            self.nodes[parent].children.discard(paths.name(path))
        return [WatchEvent(EventType.DELETED, path), WatchEvent(EventType.CHILDREN, parent)]

    def subtree(self, path: str) -> Iterator[str]:
        """``path`` and its descendants, deepest first."""
        for child in sorted(self.nodes[path].children):
            yield from self.subtree(paths.join(path, child))
        yield path

    async def persist(self, changes: list[Change]) -> None:
        """Make persistent changes durable before the caller is answered (no-op in memory)."""


_named_trees: dict[str, MemoryTree] = {}
_named_lock = threading.Lock()


def named_tree(name: str) -> MemoryTree:
    """The process-wide tree called ``name`` (created on first use)."""
    with _named_lock:
        return _named_trees.setdefault(name, MemoryTree())


class MemoryStore(MetadataStore):
    """One session on a ``MemoryTree``."""

    def __init__(self, tree: MemoryTree | None = None) -> None:
        self._tree = tree or MemoryTree()
        self._loop = asyncio.get_running_loop()
        self._watchers = Watchers(self._loop)
        self._closed = False
        self._session = self._tree.new_session(self)

    # -- reads ----------------------------------------------------------------------------------
    async def get(self, path: str) -> tuple[bytes, Stat]:
        self._check_open()
        with self._tree.lock:
            node = self._node(path)
            return node.value, node.stat()

    async def exists(self, path: str) -> Stat | None:
        self._check_open()
        paths.check(path)
        with self._tree.lock:
            node = self._tree.nodes.get(path)
            return node.stat() if node else None

    async def children(self, path: str) -> list[str]:
        self._check_open()
        with self._tree.lock:
            return sorted(self._node(path).children)

    # -- writes ---------------------------------------------------------------------------------
    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = True,
    ) -> str:
        self._check_open()
        paths.check(path)
        if path == "/":
            raise NodeExistsError(path)
        events: list[WatchEvent] = []
        changes: list[Change] = []
        with self._tree.lock:
            parent = paths.parent(path)
            if parent not in self._tree.nodes:
                if not make_parents:
                    raise NoNodeError(parent, f"parent of {path} does not exist: {parent}")
                events += self._make_parents(path, changes)
            if self._tree.nodes[parent].owner is not None:
                raise MetadataError(path, f"ephemeral node {parent} cannot have children")
            if sequential:
                parent_node = self._tree.nodes[parent]
                path = paths.sequential(path, parent_node.sequence)
                parent_node.sequence += 1
                # The counter must survive a restart of a persistent store, or ids repeat.
                changes.append((parent, parent_node))
            if path in self._tree.nodes:
                raise NodeExistsError(path)
            events += self._tree.add(path, value, self._session if ephemeral else None)
            if not ephemeral:
                changes.append((path, self._tree.nodes[path]))
        await self._tree.persist(changes)
        self._tree.notify(events)
        return path

    async def put(self, path: str, value: bytes, *, expected_version: int | None = None) -> Stat:
        self._check_open()
        paths.check(path)
        if expected_version == -1:
            await self.create(path, value, make_parents=True)
            return await self._stat(path)
        events: list[WatchEvent] = []
        changes: list[Change] = []
        with self._tree.lock:
            node = self._tree.nodes.get(path)
            if node is None:
                if expected_version is not None:
                    raise NoNodeError(path)
                events += self._make_parents(path, changes)
                events += self._tree.add(path, value, None)
                node = self._tree.nodes[path]
            else:
                if expected_version is not None and node.version != expected_version:
                    raise BadVersionError(
                        path, f"version conflict on {path}: expected {expected_version}, is {node.version}"
                    )
                node.value = value
                node.version += 1
                node.modified_ms = _now_ms()
                events.append(WatchEvent(EventType.CHANGED, path))
            stat = node.stat()
            if node.owner is None:
                changes.append((path, node))
        await self._tree.persist(changes)
        self._tree.notify(events)
        return stat

    async def delete(
        self, path: str, *, expected_version: int | None = None, recursive: bool = False
    ) -> None:
        self._check_open()
        paths.check(path)
        if path == "/":
            raise MetadataError(path, "the root cannot be deleted")
        events: list[WatchEvent] = []
        with self._tree.lock:
            node = self._node(path)
            if expected_version is not None and node.version != expected_version:
                raise BadVersionError(
                    path, f"version conflict on {path}: expected {expected_version}, is {node.version}"
                )
            if node.children and not recursive:
                raise NotEmptyError(path, f"{path} has children: {', '.join(sorted(node.children)[:5])}")
            doomed = list(self._tree.subtree(path))
            for victim in doomed:
                events += self._tree.remove(victim)
        await self._tree.persist([(victim, None) for victim in doomed])
        self._tree.notify(events)

    # -- watches, sessions, election ------------------------------------------------------------
    def watch(self, path: str, callback: WatchCallback, *, children: bool = False) -> None:
        self._watchers.add(paths.check(path), callback, children=children)

    def unwatch(self, path: str, callback: WatchCallback) -> None:
        self._watchers.remove(path, callback)

    def on_session_event(self, callback: SessionCallback) -> None:
        self._watchers.add_session_listener(callback)

    def deliver(self, event: WatchEvent) -> None:
        """Called by the tree, possibly from another thread."""
        if not self._closed:
            self._watchers.dispatch(event)

    @property
    def session_id(self) -> int:
        return self._session

    def election(self, path: str, identity: str) -> LeaderElection:
        return StoreLeaderElection(self, path, identity)

    def expire_session(self) -> None:
        """Expire this session as a ZooKeeper server would after a timeout: its ephemerals go,
        listeners hear EXPIRED, then a new session starts and they hear CONNECTED."""
        self._check_open()
        self._tree.notify(self._tree.end_session(self._session))
        self._watchers.session_changed(SessionState.EXPIRED)
        self._session = self._tree.new_session(self)
        self._watchers.session_changed(SessionState.CONNECTED)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._tree.notify(self._tree.end_session(self._session))
        await self._watchers.drain()

    # -- helpers --------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SessionExpiredError("/", "the metadata store is closed")

    def _node(self, path: str) -> Node:
        node = self._tree.nodes.get(paths.check(path))
        if node is None:
            raise NoNodeError(path)
        return node

    async def _stat(self, path: str) -> Stat:
        return (await self.get(path))[1]

    def _make_parents(self, path: str, changes: list[Change]) -> list[WatchEvent]:
        events: list[WatchEvent] = []
        for ancestor in paths.ancestors(path):
            node = self._tree.nodes.get(ancestor)
            if node is None:
                events += self._tree.add(ancestor, b"", None)
                changes.append((ancestor, self._tree.nodes[ancestor]))
            elif node.owner is not None:
                raise MetadataError(path, f"ephemeral node {ancestor} cannot have children")
        return events
