"""Reads of hot nodes, kept until the node changes.

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
        self._watched: set[str] = set()
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

    def drop(self, path: str) -> None:
        """Forget ``path`` (its writer calls this once its write is done)."""
        self._changes += 1
        self._kept.pop(path, None)

    def close(self) -> None:
        for path in self._watched:
            self._store.unwatch(path, self._changed)
        self._watched.clear()
        self._kept.clear()

    def _watch(self, path: str) -> None:
        if not self._listening:
            self._listening = True
            self._store.on_session_event(self._session_changed)
        if path not in self._watched:
            self._watched.add(path)
            self._store.watch(path, self._changed)

    def _changed(self, event: WatchEvent) -> None:
        self.drop(event.path)

    def _session_changed(self, _state: SessionState) -> None:
        self._changes += 1
        self._kept.clear()
