"""A transfer's destination prepares the next ledger while the source still writes
(ManagedLedgerFactory.prepare): the open that follows takes it, never out of order."""

from __future__ import annotations

import asyncio

from magnetar.broker.managed_ledger import InitialPosition, ManagedLedgerConfig, ManagedLedgerFactory
from tests.broker.managed_ledger.conftest import Storage
from tests.broker.managed_ledger.test_ledger import data

ROLL_EVERY_3 = ManagedLedgerConfig(max_entries_per_ledger=3, min_ledger_rollover_time_minutes=0)


async def read_all(factory: ManagedLedgerFactory, name: str) -> list[bytes]:
    ledger = await factory.open(name)
    reader = ledger.new_non_durable_cursor(InitialPosition.EARLIEST)
    return [e.data for e in await reader.read_entries(100)]


async def test_the_open_after_a_handover_takes_the_prepared_ledger(storage: Storage) -> None:
    name = "t/ns/persistent/handover"
    source = await ManagedLedgerFactory(storage.store, storage.client).open(name)
    for i in range(3):
        await source.add_entry(data(i))
    destination = await storage.new_factory()
    await destination.prepare(name)
    for i in range(3, 5):  # the source keeps writing while the destination prepares
        await source.add_entry(data(i))
    await source.close()
    existing = set(await storage.client.ledger_ids())
    ledger = await destination.open(name)
    assert ledger.ledgers[-1].ledger_id in existing, (
        "the open created a ledger instead of taking the prepared one"
    )
    await ledger.add_entry(data(5))
    assert await read_all(destination, name) == [data(i) for i in range(6)]
    await ledger.close()


async def test_a_prepared_ledger_older_than_the_sources_last_is_not_used(storage: Storage) -> None:
    name = "t/ns/persistent/rolled"
    source = await ManagedLedgerFactory(storage.store, storage.client, ROLL_EVERY_3).open(name)
    await source.open_cursor("sub", InitialPosition.EARLIEST)  # keeps the rolled ledgers
    await source.add_entry(data(0))
    destination = await storage.new_factory(ROLL_EVERY_3)
    await destination.prepare(name)
    prepared = max(await storage.client.ledger_ids())
    for i in range(1, 7):  # the source rolls to ledgers created after the prepared one
        await source.add_entry(data(i))
    assert source.ledgers[-1].ledger_id > prepared
    await source.close()
    ledger = await destination.open(name)
    assert ledger.ledgers[-1].ledger_id > prepared
    await ledger.add_entry(data(7))
    assert await read_all(destination, name) == [data(i) for i in range(8)]
    deadline = asyncio.get_running_loop().time() + 10
    while prepared in await storage.client.ledger_ids():  # the unused ledger is deleted
        assert asyncio.get_running_loop().time() < deadline, "the unused prepared ledger was kept"
        await asyncio.sleep(0.05)
    await ledger.close()
