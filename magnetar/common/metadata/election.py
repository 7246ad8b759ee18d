"""Leader election on any metadata store, with ZooKeeper's recipe: every participant creates an
ephemeral sequential node under the election path; the lowest is the leader; each of the others
watches only its predecessor, so a leader's departure wakes one participant, not all of them."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from magnetar.common.metadata import paths
from magnetar.common.metadata.store import (
    EventType,
    LeaderElection,
    MetadataError,
    MetadataStore,
    NoNodeError,
    SessionState,
    WatchEvent,
)

log = logging.getLogger(__name__)
_PREFIX = "n_"
#: pause before joining again after a failed round (the store is reconnecting)
_RETRY_S = 0.5


class StoreLeaderElection(LeaderElection):
    """A participant stays in the election from ``campaign`` until ``resign``: when its session
    expires (node and leadership gone), it joins again as soon as a new session opens, so a
    cluster never ends up with no leader because its leader's session once expired."""

    def __init__(self, store: MetadataStore, path: str, identity: str) -> None:
        self._store = store
        self._path = paths.check(path)
        self._identity = identity
        self._node: str | None = None
        self._leader = False
        self._participating = False
        self._expired = False
        #: the campaign under way (the caller's, or one started after a session expiry)
        self._running: asyncio.Task[None] | None = None
        #: campaigns waiting on a predecessor: woken when a new session starts, as their own
        #: node is gone and they must join again
        self._waiting: set[asyncio.Future[None]] = set()
        store.on_session_event(self._on_session)

    @property
    def is_leader(self) -> bool:
        return self._leader

    async def campaign(self) -> None:
        self._participating = True
        if self._running is None or self._running.done():
            self._running = asyncio.get_running_loop().create_task(self._campaign())
        await asyncio.shield(self._running)

    async def _campaign(self) -> None:
        while self._participating:
            try:
                if await self._try_to_lead():
                    return
            except MetadataError as exc:  # session expired or connection lost mid-campaign
                log.info("election %s: %s; joining again", self._path, exc)
                self._node = None
                await asyncio.sleep(_RETRY_S)

    async def _try_to_lead(self) -> bool:
        """One round: join if needed, lead if first, else wait for the predecessor to go."""
        if self._node is None:
            self._node = await self._store.create(
                paths.join(self._path, _PREFIX), self._identity.encode(), ephemeral=True, sequential=True
            )
        mine = paths.name(self._node)
        candidates = await self._candidates()
        if mine not in candidates:  # our node went with an expired session: join again
            self._node = None
            return False
        position = candidates.index(mine)
        if position == 0:
            self._leader = True
            return True
        await self._wait_for_deletion(paths.join(self._path, candidates[position - 1]))
        return False

    async def resign(self) -> None:
        self._participating = False
        self._leader = False
        running, self._running = self._running, None
        if running is not None and not running.done():
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
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
        """Until ``predecessor`` is deleted, or a new session starts (our own node is gone)."""
        gone = asyncio.get_running_loop().create_future()

        def on_event(event: WatchEvent) -> None:
            if event.type is EventType.DELETED and not gone.done():
                gone.set_result(None)

        self._store.watch(predecessor, on_event)
        self._waiting.add(gone)
        try:
            if await self._store.exists(predecessor) is not None:
                await gone
        finally:
            self._waiting.discard(gone)
            self._store.unwatch(predecessor, on_event)

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.EXPIRED:
            # The ephemeral node died with the session, and leadership with it.
            self._expired = True
            self._leader = False
            self._node = None
        elif state is SessionState.CONNECTED and self._expired:
            self._expired = False
            for waiting in list(self._waiting):  # a campaign under way joins again
                if not waiting.done():
                    waiting.set_result(None)
            if self._participating and (self._running is None or self._running.done()):
                # The leader (or a participant whose campaign had ended) campaigns again.
                self._running = asyncio.get_running_loop().create_task(self._campaign())
