"""File-backed metadata store for ``magnetar standalone`` (``sqlite:///path/metadata.db``).

The tree lives in memory (``memory.py``) and every change to a persistent node is written through
to SQLite, on a single writer thread so the event loop never blocks and changes land in order,
before the caller is answered. Ephemeral nodes are not written: like ZooKeeper's, they end with
the session, and a restarted process has a new one. One process owns the file at a time.
"""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from magnetar.common.metadata import paths
from magnetar.common.metadata.memory import Change, MemoryStore, MemoryTree, Node
from magnetar.common.metadata.store import MetadataError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    path TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    version INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    modified_ms INTEGER NOT NULL,
    sequence INTEGER NOT NULL
)
"""


class SqliteTree(MemoryTree):
    def __init__(self, file: Path) -> None:
        self.file = file
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metadata-sqlite")
        self._db: sqlite3.Connection | None = None
        self.sessions_open = 0
        super().__init__()

    def _open(self) -> dict[str, Node]:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.file, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(_SCHEMA)
        self._db = db
        nodes: dict[str, Node] = {"/": Node(b"")}
        rows = db.execute("SELECT path, value, version, created_ms, modified_ms, sequence FROM nodes")
        for path, value, version, created, modified, sequence in rows:
            nodes[path] = Node(bytes(value), version, None, created, modified, set(), sequence)
        for path in sorted(nodes, key=len):
            if path != "/":
                parent = nodes.get(paths.parent(path))
                if parent is None:
                    raise MetadataError(path, f"{self.file} is inconsistent: {path} has no parent")
                parent.children.add(paths.name(path))
        return nodes

    async def load(self) -> None:
        self.nodes = await asyncio.get_running_loop().run_in_executor(self._executor, self._open)

    def _write(self, changes: list[Change]) -> None:
        assert self._db is not None
        with self._db:  # one transaction per change set
            self._db.execute("BEGIN")
            for path, node in changes:
                if node is None:
                    self._db.execute("DELETE FROM nodes WHERE path = ?", (path,))
                elif path != "/":
                    self._db.execute(
                        "INSERT OR REPLACE INTO nodes VALUES (?, ?, ?, ?, ?, ?)",
                        (path, node.value, node.version, node.created_ms, node.modified_ms, node.sequence),
                    )

    async def persist(self, changes: list[Change]) -> None:
        if changes:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._write, changes)

    def close(self) -> None:
        if self._db is not None:
            self._executor.submit(self._db.close).result()
            self._db = None
        self._executor.shutdown()


class SqliteStore(MemoryStore):
    """A session on a file's tree; the file is closed when its last session closes."""

    def __init__(self, tree: SqliteTree) -> None:
        super().__init__(tree)
        self._sqlite = tree
        tree.sessions_open += 1

    async def close(self) -> None:
        if self._closed:
            return
        await super().close()
        self._sqlite.sessions_open -= 1
        if self._sqlite.sessions_open == 0:
            _trees.pop(self._sqlite.file, None)
            await asyncio.to_thread(self._sqlite.close)


_trees: dict[Path, SqliteTree] = {}


async def open_sqlite_store(file: str) -> SqliteStore:
    """Sessions opened on one file in one process share its tree (a standalone's bookie and
    broker see each other's nodes, as two ZooKeeper clients would)."""
    path = Path(file)
    tree = _trees.get(path)
    if tree is None:
        tree = SqliteTree(path)
        _trees[path] = tree
        await tree.load()
    return SqliteStore(tree)
