"""Choosing bookies for ensembles, and knowing where each bookie listens.

Bookies announce themselves with ephemeral nodes (``bookie/layout.py``). New ensembles and
replacements come only from writable bookies; addresses of bookies that have since gone are
remembered, so that their entries can still be read when they come back.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable

from magnetar.bookie.client.errors import NotEnoughBookiesError
from magnetar.bookie.layout import DEFAULT_RACK, READONLY_BOOKIES, WRITABLE_BOOKIES, BookieRegistration
from magnetar.common.metadata.cache import ReadCache
from magnetar.common.metadata.store import MetadataStore, NoNodeError

log = logging.getLogger(__name__)


class BookieDirectory:
    """The bookies' registrations. The writable ones are read once and then kept by watches
    (``ReadCache``), as BookKeeper's registration client does: a new ledger or an ensemble change
    asks the store nothing, however many bookies there are."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._addresses: dict[str, str] = {}
        self._writable = ReadCache(store)

    async def registrations(self, parent: str) -> list[BookieRegistration]:
        return await self._registrations(parent, self._store.children, self._get)

    async def writable(self) -> list[BookieRegistration]:
        return await self._registrations(WRITABLE_BOOKIES, self._writable.children, self._writable.get)

    async def _get(self, path: str) -> bytes:
        return (await self._store.get(path))[0]

    async def _registrations(
        self,
        parent: str,
        children: Callable[[str], Awaitable[list[str]]],
        get: Callable[[str], Awaitable[bytes]],
    ) -> list[BookieRegistration]:
        try:
            names = await children(parent)
        except NoNodeError:
            return []
        found = []
        for name in names:
            try:
                data = await get(f"{parent}/{name}")
            except NoNodeError:
                continue  # went away between the listing and the read
            registration = BookieRegistration.decode(data)
            self._addresses[registration.bookie_id] = registration.address
            found.append(registration)
        return found

    def close(self) -> None:
        self._writable.close()

    async def read_only(self) -> list[BookieRegistration]:
        return await self.registrations(READONLY_BOOKIES)

    async def registration(self, bookie_id: str) -> BookieRegistration | None:
        """The bookie's registration now (None: not registered). Writable bookies' nodes are
        watched, so a restarted bookie's new address and ports are seen without a read."""
        for parent, get in ((WRITABLE_BOOKIES, self._writable.get), (READONLY_BOOKIES, self._get)):
            try:
                data = await get(f"{parent}/{bookie_id}")
            except NoNodeError:
                continue
            registration = BookieRegistration.decode(data)
            self._addresses[bookie_id] = registration.address
            return registration
        return None

    def known(self) -> set[str]:
        """Every bookie seen registered, writable or read-only, whether or not it is now."""
        return set(self._addresses)

    async def read_all(self) -> None:
        """Read every registration, writable and read-only, remembering each bookie's address."""
        await self.writable()
        await self.read_only()

    async def address(self, bookie_id: str) -> str:
        if bookie_id not in self._addresses:
            await self.read_all()
        # Bookie ids default to host:port, so an id never seen registered is still worth a try.
        return self._addresses.get(bookie_id, bookie_id)


class EnsemblePlacement:
    """Choose bookies among the writable ones, spreading every write set over racks.

    Without racks (every bookie on the default rack) this is a random choice. With racks, as
    BookKeeper's rack-aware and region-aware policies do, each write set (the Qw consecutive
    positions of the ensemble that store one entry) should span as many regions and racks as
    there are: a rack is ``/region/rack`` or ``/rack``, and losing one rack or zone then loses
    at most one copy of any entry wherever the cluster allows it.
    """

    #: random ensembles tried for a new ledger; the best spread wins
    CANDIDATES = 64
    #: how often a new ensemble still short of bookies looks at the registrations again
    REGISTRATION_POLL_S = 0.05

    def __init__(
        self, directory: BookieDirectory, rng: random.Random | None = None, *, replacement_wait_s: float = 0.0
    ) -> None:
        self._directory = directory
        self._rng = rng or random.Random()
        self._replacement_wait_s = replacement_wait_s

    async def new_ensemble(
        self,
        size: int,
        exclude: Iterable[str] = (),
        *,
        write_quorum: int | None = None,
        wait_s: float = 0.0,
    ) -> tuple[str, ...]:
        """``size`` writable bookies, waiting up to ``wait_s`` for that many to be registered."""
        excluded = set(exclude)

        def usable(writable: list[BookieRegistration]) -> dict[str, str]:
            return {r.bookie_id: r.rack for r in writable if r.bookie_id not in excluded}

        writable, found = await self._writable_when(lambda w: len(usable(w)) >= size, wait_s)
        racks = usable(writable)
        if not found:
            raise NotEnoughBookiesError(size, sorted(racks))
        candidates = list(racks)
        if len(set(racks.values())) == 1:
            return tuple(self._rng.sample(candidates, size))
        quorum = write_quorum or size
        # The first try that spreads as well as the racks allow wins at once: with few bookies
        # (two bookies on two racks, say) that is the first, and a reload of thousands of topics
        # does not score 64 tries for each of their ledgers.
        ideal = best_spread(racks.values(), size, quorum)
        best: tuple[str, ...] = ()
        best_score = -1
        for _ in range(self.CANDIDATES):
            ensemble = tuple(self._rng.sample(candidates, size))
            score = spread(ensemble, racks, quorum)
            if score > best_score:
                best, best_score = ensemble, score
                if score >= ideal:
                    break
        return best

    async def replace(
        self,
        ensemble: tuple[str, ...],
        failed: str,
        exclude: Iterable[str] = (),
        *,
        write_quorum: int | None = None,
    ) -> tuple[str, ...]:
        """``ensemble`` with ``failed`` replaced by a writable bookie outside it and ``exclude``.

        With none writable now, it waits (up to ``replacement_wait_s``) while a bookie seen
        registered before could still be one: after a metadata-store outage every bookie
        registers again moments after the store returns, and a writer (or a ledger's recovery,
        as a topic loads) that gave up in those moments stopped the topic's publishing until a
        client's retry. Where no other bookie was ever seen, nothing can come, and it fails at once.
        """
        excluded = set(ensemble) | set(exclude) | {failed}

        def usable(writable: list[BookieRegistration]) -> list[str]:
            return [r.bookie_id for r in writable if r.bookie_id not in excluded]

        writable, found = await self._writable_when(
            lambda w: bool(usable(w)),
            self._replacement_wait_s,
            hopeless=lambda: not self._directory.known() - excluded,
            waiting=f"no writable bookie can replace {failed} yet: waiting for bookies to register",
        )
        if not found:
            raise NotEnoughBookiesError(len(ensemble), [b for b in ensemble if b != failed])
        candidates = usable(writable)
        racks = {r.bookie_id: r.rack for r in writable}
        self._rng.shuffle(candidates)  # ties go to a random bookie, not always the same one

        def with_(candidate: str) -> tuple[str, ...]:
            return tuple(candidate if b == failed else b for b in ensemble)

        best = max(candidates, key=lambda c: spread(with_(c), racks, write_quorum or len(ensemble)))
        return with_(best)

    async def _writable_when(
        self,
        enough: Callable[[list[BookieRegistration]], bool],
        wait_s: float,
        *,
        hopeless: Callable[[], bool] = lambda: False,
        waiting: str = "",
    ) -> tuple[list[BookieRegistration], bool]:
        """The writable bookies' registrations, and whether ``enough`` holds of them: looked at
        again every REGISTRATION_POLL_S until it does, for up to ``wait_s``, or until ``hopeless``
        (nothing that could still register would do). ``waiting`` is logged once, if it waits."""
        deadline = time.monotonic() + wait_s
        while True:
            writable = await self._directory.writable()
            if enough(writable):
                return writable, True
            if time.monotonic() >= deadline or hopeless():
                return writable, False
            if waiting:
                log.info("%s", waiting)
                waiting = ""
            await asyncio.sleep(self.REGISTRATION_POLL_S)


def spread(ensemble: tuple[str, ...], racks: dict[str, str], write_quorum: int) -> int:
    """How well the write sets of ``ensemble`` spread over regions, then racks (higher: better)."""
    size = len(ensemble)
    score = 0
    for start in range(size):
        members = [racks.get(ensemble[(start + i) % size], DEFAULT_RACK) for i in range(write_quorum)]
        score += _score(members)
    return score


def best_spread(racks: Iterable[str], size: int, write_quorum: int) -> int:
    """A bound on ``spread`` over any ensemble of ``size`` from bookies on ``racks``: every write
    set on as many regions and racks as there are (not always reachable, so only a bound)."""
    known = set(racks)
    regions = {_region(rack) for rack in known} - {""}
    return size * (1000 * min(write_quorum, len(regions)) + min(write_quorum, len(known)))


def _score(members: list[str]) -> int:
    regions = {_region(rack) for rack in members} - {""}
    return 1000 * len(regions) + len(set(members))


def _region(rack: str) -> str:
    """``/region/rack``'s region; "" for a rack named without one."""
    return rack.strip("/").split("/")[0] if rack.count("/") > 1 else ""
