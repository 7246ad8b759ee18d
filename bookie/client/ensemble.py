"""Choosing bookies for ensembles, and knowing where each bookie listens.

Bookies announce themselves with ephemeral nodes (``bookie/layout.py``). New ensembles and
replacements come only from writable bookies; addresses of bookies that have since gone are
remembered, so that their entries can still be read when they come back.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable

from magnetar.bookie.client.errors import NotEnoughBookiesError
from magnetar.bookie.layout import DEFAULT_RACK, READONLY_BOOKIES, WRITABLE_BOOKIES, BookieRegistration
from magnetar.common.metadata.store import MetadataStore, NoNodeError


class BookieDirectory:
    """The bookies' registrations. The writable ones are read once and then kept by a watch on
    their list, as BookKeeper's registration client does: a new ledger or an ensemble change
    asks the store nothing, however many bookies there are."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._addresses: dict[str, str] = {}
        self._writable: list[BookieRegistration] | None = None
        #: counts the list's changes: a read that a change overtook is not kept
        self._changes = 0
        self._watching = False

    async def registrations(self, parent: str) -> list[BookieRegistration]:
        try:
            names = await self._store.children(parent)
        except NoNodeError:
            return []
        found = []
        for name in names:
            try:
                data, _ = await self._store.get(f"{parent}/{name}")
            except NoNodeError:
                continue  # went away between the listing and the read
            registration = BookieRegistration.decode(data)
            self._addresses[registration.bookie_id] = registration.address
            found.append(registration)
        return found

    async def writable(self) -> list[BookieRegistration]:
        if self._writable is not None:
            return self._writable
        if not self._watching:
            self._watching = True
            self._store.watch(WRITABLE_BOOKIES, self._changed, children=True)
            # events missed while disconnected are not replayed: read afresh after any change
            self._store.on_session_event(self._changed)
        changes = self._changes
        found = await self.registrations(WRITABLE_BOOKIES)
        if changes == self._changes:
            self._writable = found
        return found

    def _changed(self, _event: object) -> None:
        self._changes += 1
        self._writable = None

    def close(self) -> None:
        if self._watching:
            self._store.unwatch(WRITABLE_BOOKIES, self._changed)

    async def read_only(self) -> list[BookieRegistration]:
        return await self.registrations(READONLY_BOOKIES)

    async def address(self, bookie_id: str) -> str:
        if bookie_id not in self._addresses:
            await self.writable()
            await self.read_only()
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

    def __init__(self, directory: BookieDirectory, rng: random.Random | None = None) -> None:
        self._directory = directory
        self._rng = rng or random.Random()

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
        deadline = time.monotonic() + wait_s
        while True:
            writable = await self._directory.writable()
            racks = {r.bookie_id: r.rack for r in writable if r.bookie_id not in excluded}
            if len(racks) >= size:
                break
            if time.monotonic() >= deadline:
                raise NotEnoughBookiesError(size, sorted(racks))
            await asyncio.sleep(self.REGISTRATION_POLL_S)
        candidates = list(racks)
        if len(set(racks.values())) == 1:
            return tuple(self._rng.sample(candidates, size))
        tries = [tuple(self._rng.sample(candidates, size)) for _ in range(self.CANDIDATES)]
        return max(tries, key=lambda e: spread(e, racks, write_quorum or size))

    async def replace(
        self,
        ensemble: tuple[str, ...],
        failed: str,
        exclude: Iterable[str] = (),
        *,
        write_quorum: int | None = None,
    ) -> tuple[str, ...]:
        excluded = set(ensemble) | set(exclude) | {failed}
        writable = await self._directory.writable()
        candidates = [r.bookie_id for r in writable if r.bookie_id not in excluded]
        if not candidates:
            raise NotEnoughBookiesError(len(ensemble), [b for b in ensemble if b != failed])
        racks = {r.bookie_id: r.rack for r in writable}
        self._rng.shuffle(candidates)  # ties go to a random bookie, not always the same one

        def with_(candidate: str) -> tuple[str, ...]:
            return tuple(candidate if b == failed else b for b in ensemble)

        best = max(candidates, key=lambda c: spread(with_(c), racks, write_quorum or len(ensemble)))
        return with_(best)


def spread(ensemble: tuple[str, ...], racks: dict[str, str], write_quorum: int) -> int:
    """How well the write sets of ``ensemble`` spread over regions, then racks (higher: better)."""
    size = len(ensemble)
    score = 0
    for start in range(size):
        members = [racks.get(ensemble[(start + i) % size], DEFAULT_RACK) for i in range(write_quorum)]
        regions = {rack.strip("/").split("/")[0] for rack in members if rack.count("/") > 1}
        score += 1000 * len(regions) + len(set(members))
    return score
