"""Reads of hot nodes (their data, or their list of children), kept until they change.

As Pulsar's MetadataCache: a node read on every lookup and every topic load (a namespace's
policies) is read from the store once per change, not once per use. A watch on the node drops
what was kept when it changes, is created or deleted; a session event drops everything (changes
made while disconnected are not replayed). Whoever writes a node through this process drops it
itself right after, so it reads its own writes.
"""

from __future__ import annotations

from magnetar.common.metadata.store import MetadataStore, NoNodeError, SessionState, WatchEvent

#: kept for a node that does not exist
_MISSING = None


class ReadCache:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._kept: dict[str, bytes | None] = {}
        self._kept_children: dict[str, list[str] | None] = {}
        self._watched: set[str] = set()
        self._watched_children: set[str] = set()
        #: counts the changes seen: a read that a change overtook is not kept
        self._changes = 0
        self._listening = False

    async def get(self, path: str) -> bytes:
        """The node's data; NoNodeError when it does not exist."""
        if path in self._kept:
            data = self._kept[path]
            if data is _MISSING:
                raise NoNodeError(path)
            return data
        self._watch(path)
        changes = self._changes
        try:
            data, _ = await self._store.get(path)
        except NoNodeError:
            if changes == self._changes:
                self._kept[path] = _MISSING
            raise
        if changes == self._changes:
            self._kept[path] = data
        return data

    async def children(self, path: str) -> list[str]:
        """The names of the node's children; NoNodeError when it does not exist."""
        if path in self._kept_children:
            names = self._kept_children[path]
            if names is _MISSING:
                raise NoNodeError(path)
            return names
        self._watch(path, children=True)
        changes = self._changes
        try:
            names = await self._store.children(path)
        except NoNodeError:
            if changes == self._changes:
                self._kept_children[path] = _MISSING
            raise
        if changes == self._changes:
            self._kept_children[path] = names
        return names

    def drop(self, path: str) -> None:
        """Forget ``path`` (its writer calls this once its write is done)."""
        self._changes += 1
        self._kept.pop(path, None)
        self._kept_children.pop(path, None)

    def close(self) -> None:
        for path in self._watched:
            self._store.unwatch(path, self._changed)
        for path in self._watched_children:
            self._store.unwatch(path, self._changed)
        self._watched.clear()
        self._watched_children.clear()
        self._kept.clear()
        self._kept_children.clear()

    def _watch(self, path: str, *, children: bool = False) -> None:
        if not self._listening:
            self._listening = True
            self._store.on_session_event(self._session_changed)
        watched = self._watched_children if children else self._watched
        if path not in watched:
            watched.add(path)
            self._store.watch(path, self._changed, children=children)

    def _changed(self, event: WatchEvent) -> None:
        self.drop(event.path)

    def _session_changed(self, _state: SessionState) -> None:
        self._changes += 1
        self._kept.clear()
        self._kept_children.clear()
