"""Ledger metadata in the metadata store: id allocation, create, read, compare-and-set, delete."""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.bookie.client.errors import NoSuchLedgerError
from magnetar.bookie.client.ledger_metadata import LedgerMetadata
from magnetar.bookie.layout import LEDGER_ID_GENERATOR, LEDGERS, ledger_id_from_name, ledger_path
from magnetar.common.metadata.store import MetadataStore, NoNodeError


@dataclass(frozen=True)
class VersionedMetadata:
    metadata: LedgerMetadata
    version: int


class LedgerManager:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def new_ledger_id(self) -> int:
        # A sequential node gives a cluster-wide unique, increasing id without a CAS retry loop.
        path = await self._store.create(f"{LEDGER_ID_GENERATOR}/id-", sequential=True)
        await self._store.delete(path)
        return int(path.rsplit("-", 1)[1])

    async def create(self, ledger_id: int, metadata: LedgerMetadata) -> VersionedMetadata:
        await self._store.create(ledger_path(ledger_id), metadata.encode())
        return VersionedMetadata(metadata, 0)

    async def read(self, ledger_id: int) -> VersionedMetadata:
        try:
            data, stat = await self._store.get(ledger_path(ledger_id))
        except NoNodeError:
            raise NoSuchLedgerError(ledger_id) from None
        return VersionedMetadata(LedgerMetadata.decode(data, ledger_id=ledger_id), stat.version)

    async def write(
        self, ledger_id: int, metadata: LedgerMetadata, expected_version: int
    ) -> VersionedMetadata:
        """Compare-and-set; raises BadVersionError when someone else changed it first."""
        stat = await self._store.put(
            ledger_path(ledger_id), metadata.encode(), expected_version=expected_version
        )
        return VersionedMetadata(metadata, stat.version)

    async def delete(self, ledger_id: int) -> None:
        try:
            await self._store.delete(ledger_path(ledger_id))
        except NoNodeError:
            raise NoSuchLedgerError(ledger_id) from None

    async def ledger_ids(self) -> list[int]:
        try:
            names = await self._store.children(LEDGERS)
        except NoNodeError:
            return []
        return sorted(i for i in map(ledger_id_from_name, names) if i is not None)
