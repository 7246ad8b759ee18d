"""Choosing bookies for ensembles, and knowing where each bookie listens.

Bookies announce themselves with ephemeral nodes (``bookie/layout.py``). New ensembles and
replacements come only from writable bookies; addresses of bookies that have since gone are
remembered, so that their entries can still be read when they come back.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from magnetar.bookie.client.errors import NotEnoughBookiesError
from magnetar.bookie.layout import READONLY_BOOKIES, WRITABLE_BOOKIES, BookieRegistration
from magnetar.common.metadata.store import MetadataStore, NoNodeError


class BookieDirectory:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._addresses: dict[str, str] = {}

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
        return await self.registrations(WRITABLE_BOOKIES)

    async def read_only(self) -> list[BookieRegistration]:
        return await self.registrations(READONLY_BOOKIES)

    async def address(self, bookie_id: str) -> str:
        if bookie_id not in self._addresses:
            await self.writable()
            await self.read_only()
        # Bookie ids default to host:port, so an id never seen registered is still worth a try.
        return self._addresses.get(bookie_id, bookie_id)


class EnsemblePlacement:
    """Random placement among writable bookies (rack awareness arrives with auto-recovery)."""

    def __init__(self, directory: BookieDirectory, rng: random.Random | None = None) -> None:
        self._directory = directory
        self._rng = rng or random.Random()

    async def new_ensemble(self, size: int, exclude: Iterable[str] = ()) -> tuple[str, ...]:
        excluded = set(exclude)
        candidates = [r.bookie_id for r in await self._directory.writable() if r.bookie_id not in excluded]
        if len(candidates) < size:
            raise NotEnoughBookiesError(size, sorted(candidates))
        return tuple(self._rng.sample(candidates, size))

    async def replace(
        self, ensemble: tuple[str, ...], failed: str, exclude: Iterable[str] = ()
    ) -> tuple[str, ...]:
        excluded = set(ensemble) | set(exclude) | {failed}
        candidates = [r.bookie_id for r in await self._directory.writable() if r.bookie_id not in excluded]
        if not candidates:
            raise NotEnoughBookiesError(len(ensemble), [b for b in ensemble if b != failed])
        replacement = self._rng.choice(candidates)
        return tuple(replacement if b == failed else b for b in ensemble)
