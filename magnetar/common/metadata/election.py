"""Leader election on any metadata store, with ZooKeeper's recipe: every participant creates an
ephemeral sequential node under the election path; the lowest is the leader; each of the others
watches only its predecessor, so a leader's departure wakes one participant, not all of them."""

from __future__ import annotations

import asyncio
import contextlib

from magnetar.common.metadata import paths
from magnetar.common.metadata.store import (
    EventType,
    LeaderElection,
    MetadataStore,
    NoNodeError,
    SessionState,
    WatchEvent,
)

_PREFIX = "n_"


class StoreLeaderElection(LeaderElection):
    def __init__(self, store: MetadataStore, path: str, identity: str) -> None:
        self._store = store
        self._path = paths.check(path)
        self._identity = identity
        self._node: str | None = None
        self._leader = False
        store.on_session_event(self._on_session)

    @property
    def is_leader(self) -> bool:
        return self._leader

    async def campaign(self) -> None:
        if self._node is None:
            self._node = await self._store.create(
                paths.join(self._path, _PREFIX), self._identity.encode(), ephemeral=True, sequential=True
            )
        mine = paths.name(self._node)
        while True:
            candidates = await self._candidates()
            if mine not in candidates:  # our node went with an expired session: join again
                self._node = None
                await self.campaign()
                return
            position = candidates.index(mine)
            if position == 0:
                self._leader = True
                return
            await self._wait_for_deletion(paths.join(self._path, candidates[position - 1]))

    async def resign(self) -> None:
        self._leader = False
        node, self._node = self._node, None
        if node is not None:
            with contextlib.suppress(NoNodeError):
                await self._store.delete(node)

    async def leader(self) -> str | None:
        for name in await self._candidates():
            with contextlib.suppress(NoNodeError):
                value, _ = await self._store.get(paths.join(self._path, name))
                return value.decode()
        return None

    async def _candidates(self) -> list[str]:
        try:
            names = await self._store.children(self._path)
        except NoNodeError:
            return []
        return sorted(n for n in names if n.startswith(_PREFIX))

    async def _wait_for_deletion(self, predecessor: str) -> None:
        gone = asyncio.get_running_loop().create_future()

        def on_event(event: WatchEvent) -> None:
            if event.type is EventType.DELETED and not gone.done():
                gone.set_result(None)

        self._store.watch(predecessor, on_event)
        try:
            if await self._store.exists(predecessor) is not None:
                await gone
        finally:
            self._store.unwatch(predecessor, on_event)

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.EXPIRED:
            # The ephemeral node died with the session; whoever campaigns next takes over.
            self._leader = False
            self._node = None
