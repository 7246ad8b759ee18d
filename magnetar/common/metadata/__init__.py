"""The metadata store (architecture §4) and ``open_store``, which picks a backend from a URL:

- ``memory:`` a private in-process tree; ``memory://NAME`` the process-wide tree called NAME
  (what a bookie and a broker in one test process share);
- ``sqlite:///path/to/metadata.db`` the file-backed store of ``magnetar standalone``;
- ``zk://host:port[,host:port...][/chroot]`` ZooKeeper through kazoo.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from magnetar.common.metadata.store import (
    BadVersionError,
    EventType,
    LeaderElection,
    MetadataError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SessionState,
    Stat,
    WatchEvent,
)

__all__ = [
    "BadVersionError",
    "EventType",
    "InvalidStoreUrlError",
    "LeaderElection",
    "MetadataError",
    "MetadataStore",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionExpiredError",
    "SessionState",
    "Stat",
    "WatchEvent",
    "open_store",
]


class InvalidStoreUrlError(ValueError):
    pass


async def open_store(url: str, *, session_timeout_s: float = 30.0) -> MetadataStore:
    """Open a session on the store named by ``url`` (see the module docstring)."""
    scheme = url.split(":", 1)[0] if ":" in url else ""
    if scheme == "memory":
        from magnetar.common.metadata.memory import MemoryStore, named_tree

        name = url[len("memory:") :].lstrip("/")
        return MemoryStore(named_tree(name) if name else None)
    if scheme == "sqlite":
        from magnetar.common.metadata.sqlite import open_sqlite_store

        path = urlsplit(url).path
        if not path:
            raise InvalidStoreUrlError(f"sqlite store URL needs a file path: {url!r} (sqlite:///abs/path.db)")
        return await open_sqlite_store(path)
    if scheme == "zk":
        from magnetar.common.metadata.zookeeper import open_zookeeper_store

        parts = urlsplit(url)
        if not parts.netloc:
            raise InvalidStoreUrlError(f"zk store URL needs host:port: {url!r} (zk://127.0.0.1:2181/chroot)")
        return await open_zookeeper_store(parts.netloc, parts.path.rstrip("/"), session_timeout_s)
    raise InvalidStoreUrlError(
        f"unknown metadata store URL {url!r}: expected memory:, memory://NAME, sqlite:///PATH or "
        "zk://HOST:PORT/CHROOT"
    )
