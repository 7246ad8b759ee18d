"""Rack- and region-aware placement: every write set spreads over as many racks (and regions)
as the cluster has, so losing one rack loses at most one copy of any entry."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest

from magnetar.bookie.client.ensemble import BookieDirectory, EnsemblePlacement, best_spread, spread
from magnetar.bookie.client.errors import NotEnoughBookiesError
from magnetar.bookie.layout import WRITABLE_BOOKIES, BookieRegistration
from magnetar.common.metadata import MetadataStore, open_store


async def register(store: MetadataStore, racks: dict[str, str]) -> None:
    for bookie_id, rack in racks.items():
        registration = BookieRegistration(bookie_id, bookie_id, rack)
        await store.create(f"{WRITABLE_BOOKIES}/{bookie_id}", registration.encode(), ephemeral=True)


def write_sets(ensemble: tuple[str, ...], qw: int) -> list[list[str]]:
    return [[ensemble[(i + j) % len(ensemble)] for j in range(qw)] for i in range(len(ensemble))]


async def test_write_sets_span_racks(memory_url: str) -> None:
    store = await open_store(memory_url)
    racks = {f"b{i}": f"/rack-{i % 3}" for i in range(9)}  # three racks of three bookies
    await register(store, racks)
    placement = EnsemblePlacement(BookieDirectory(store), random.Random(7))
    for _ in range(20):
        ensemble = await placement.new_ensemble(3, write_quorum=2)
        for members in write_sets(ensemble, 2):
            assert len({racks[b] for b in members}) == 2, f"{ensemble}: a write set on one rack"
    await store.close()


async def test_replacement_comes_from_another_rack(memory_url: str) -> None:
    store = await open_store(memory_url)
    racks = {"a1": "/rack-a", "a2": "/rack-a", "b1": "/rack-b", "b2": "/rack-b", "c1": "/rack-c"}
    await register(store, racks)
    placement = EnsemblePlacement(BookieDirectory(store), random.Random(1))
    # c1 fails in (a1, b1, c1): only a rack-c bookie would keep every write set on two racks,
    # and there is none left, so at least no write set may end on a single rack where avoidable.
    replaced = await placement.replace(("a1", "b1", "c1"), "c1", write_quorum=2)
    assert "c1" not in replaced
    spread = [len({racks[b] for b in ws}) for ws in write_sets(replaced, 2)]
    assert spread.count(2) >= 2
    await store.close()


async def test_regions_come_before_racks(memory_url: str) -> None:
    store = await open_store(memory_url)
    racks = {
        "e1": "/east/r1", "e2": "/east/r2", "e3": "/east/r3",
        "w1": "/west/r1", "w2": "/west/r2", "w3": "/west/r3",
    }  # fmt: skip
    await register(store, racks)
    placement = EnsemblePlacement(BookieDirectory(store), random.Random(3))
    for _ in range(20):
        ensemble = await placement.new_ensemble(4, write_quorum=2)
        for members in write_sets(ensemble, 2):
            assert {racks[b].split("/")[1] for b in members} == {"east", "west"}, ensemble
    await store.close()


async def test_without_racks_any_bookies_will_do(memory_url: str) -> None:
    store = await open_store(memory_url)
    await register(store, {f"b{i}": "/default-rack" for i in range(5)})
    placement = EnsemblePlacement(BookieDirectory(store))
    ensemble = await placement.new_ensemble(5, write_quorum=3)
    assert sorted(ensemble) == [f"b{i}" for i in range(5)]
    await store.close()


async def test_new_ensembles_ask_the_store_once_and_see_bookies_that_come_and_go(store_url: str) -> None:
    """The writable bookies are read once and kept by a watch (BookKeeper's registration client):
    a thousand new ledgers list them once, and a bookie that registers or leaves is seen."""
    store = await open_store(store_url)
    await register(store, {"b1": "/default-rack", "b2": "/default-rack"})
    listed = 0
    real = store.children

    async def children(path: str) -> list[str]:
        nonlocal listed
        listed += path == WRITABLE_BOOKIES
        return await real(path)

    store.children = children  # type: ignore[method-assign]
    directory = BookieDirectory(store)
    placement = EnsemblePlacement(directory, random.Random(5))
    for _ in range(1000):
        assert set(await placement.new_ensemble(2)) == {"b1", "b2"}
    assert listed == 1

    await register(store, {"b3": "/default-rack"})
    assert len(await placement.new_ensemble(3, wait_s=15)) == 3  # waits until it sees b3
    await store.delete(f"{WRITABLE_BOOKIES}/b1")
    deadline = asyncio.get_running_loop().time() + 15
    while "b1" in {r.bookie_id for r in await directory.writable()}:
        assert asyncio.get_running_loop().time() < deadline, "b1's departure was never seen"
        await asyncio.sleep(0.02)
    for _ in range(50):
        assert "b1" not in await placement.new_ensemble(2)
    directory.close()
    await store.close()


async def test_an_ensemble_spreads_as_well_as_any_when_the_racks_cannot_give_every_write_set_two(
    memory_url: str,
) -> None:
    """Four bookies on rack a, one on rack b: no ensemble of three puts every write set on two
    racks, so the choice cannot stop at an ideal spread and must still find the best there is."""
    store = await open_store(memory_url)
    racks = {"a1": "/rack-a", "a2": "/rack-a", "a3": "/rack-a", "a4": "/rack-a", "b1": "/rack-b"}
    await register(store, racks)
    placement = EnsemblePlacement(BookieDirectory(store), random.Random(11))
    for _ in range(20):
        ensemble = await placement.new_ensemble(3, write_quorum=2)
        assert "b1" in ensemble, f"{ensemble}: every write set on rack a where two could span racks"
    await store.close()


def test_no_ensemble_spreads_better_than_the_bound() -> None:
    rng = random.Random(2)
    for _ in range(200):
        racks = {f"b{i}": rng.choice(["/r1", "/r2", "/east/r1", "/west/r2", "/east/r3"]) for i in range(6)}
        size, quorum = rng.randint(2, 6), 2
        bound = best_spread(racks.values(), size, quorum)
        for ensemble in itertools.permutations(racks, size):
            assert spread(ensemble, racks, quorum) <= bound, (ensemble, racks)


async def test_a_replacement_waits_for_bookies_registering_again_and_not_for_bookies_never_seen(
    memory_url: str,
) -> None:
    """After a metadata-store outage every bookie registers again moments after the store returns.
    A writer whose bookies failed then waits for one of the others to come back, instead of
    stopping; with no other bookie ever seen, it fails at once."""
    store = await open_store(memory_url)
    await register(store, {b: "/default-rack" for b in ("b1", "b2", "b3", "b4")})
    directory = BookieDirectory(store)
    await directory.writable()  # as a client does when it starts
    placement = EnsemblePlacement(directory, random.Random(4), replacement_wait_s=30)
    for bookie in ("b1", "b2", "b3", "b4"):
        await store.delete(f"{WRITABLE_BOOKIES}/{bookie}")  # their sessions expired
    deadline = asyncio.get_running_loop().time() + 15
    while await directory.writable():
        assert asyncio.get_running_loop().time() < deadline, "the departures were never seen"
        await asyncio.sleep(0.02)

    replacing = asyncio.create_task(placement.replace(("b1", "b2"), "b1", exclude={"b1", "b2"}))
    await asyncio.sleep(0.2)
    assert not replacing.done(), "gave up while bookies it had seen could still register again"
    await register(store, {"b3": "/default-rack"})
    assert await asyncio.wait_for(replacing, 30) == ("b3", "b2")

    with pytest.raises(NotEnoughBookiesError):  # b3 and b4 excluded as well: nothing can come
        await asyncio.wait_for(placement.replace(("b1", "b2"), "b1", exclude={"b1", "b2", "b3", "b4"}), 5)
    directory.close()
    await store.close()
