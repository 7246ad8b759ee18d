"""The auditor: notices lost bookies and marks their ledgers under-replicated.

Exactly one runs at a time (leader election); every bookie campaigns, so the role moves when
the auditor's bookie goes. It compares the registered bookies with those it saw before: a bookie
missing for ``lost_bookie_recovery_delay`` seconds is lost, and every ledger with a fragment on
it gets a mark. A full audit (on taking the role after that delay, every
``auditor_periodic_check_interval`` seconds, and whenever ``magnetar shell triggeraudit`` asks)
checks every ledger's ensembles against the registered bookies and, with
``auditor_entry_level_check``, reads each entry from each of its replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from magnetar.bookie.autorecovery.marks import Mark, UnderReplication
from magnetar.bookie.client import BKError, LedgerClient, LedgerMetadata, LedgerState, NoSuchLedgerError
from magnetar.bookie.digest import verify
from magnetar.bookie.layout import AUDIT_REQUESTED, AUDITOR_ELECTION, READONLY_BOOKIES, WRITABLE_BOOKIES
from magnetar.common.metadata import LeaderElection, MetadataError, MetadataStore, WatchEvent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuditorSettings:
    lost_bookie_recovery_delay_s: float = 30.0
    periodic_check_interval_s: float = 604_800.0
    entry_level_check: bool = False


class Auditor:
    def __init__(
        self, store: MetadataStore, client: LedgerClient, identity: str, settings: AuditorSettings
    ) -> None:
        self._store = store
        self._client = client
        self._identity = identity
        self._settings = settings
        self._marks = UnderReplication(store)
        self._known: set[str] = set()
        self._grace: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._audit_requested = asyncio.Event()
        self._election: LeaderElection | None = None
        #: ledgers marked under-replicated, as last counted (exported as a metric)
        self.under_replicated = 0

    @property
    def is_auditor(self) -> bool:
        return self._election is not None and self._election.is_leader

    async def run(self) -> None:
        """Campaign, then audit for as long as this bookie is the auditor."""
        election = self._election = self._store.election(AUDITOR_ELECTION, self._identity)
        await election.campaign()
        log.info("%s is the auditor", self._identity)
        self._known = await self.live_bookies()
        for parent in (WRITABLE_BOOKIES, READONLY_BOOKIES):
            self._store.watch(parent, self._on_bookies, children=True)
        self._store.watch(AUDIT_REQUESTED, self._on_request)
        try:
            await self._loop()
        finally:
            for parent in (WRITABLE_BOOKIES, READONLY_BOOKIES):
                self._store.unwatch(parent, self._on_bookies)
            self._store.unwatch(AUDIT_REQUESTED, self._on_request)
            for task in self._grace.values():
                task.cancel()
            await election.resign()

    async def _loop(self) -> None:
        # Bookies that went before we took the role are caught by a first audit after the delay.
        next_audit = asyncio.get_running_loop().time() + self._settings.lost_bookie_recovery_delay_s
        while True:
            # Wake at least every few seconds to keep the under-replicated count current.
            timeout = min(5.0, max(0.0, next_audit - asyncio.get_running_loop().time()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()
            try:
                await self._bookies_changed()
                now = asyncio.get_running_loop().time()
                if self._audit_requested.is_set() or now >= next_audit:
                    self._audit_requested.clear()
                    await self.audit()
                    period = self._settings.periodic_check_interval_s
                    next_audit = now + period if period > 0 else float("inf")
                self.under_replicated = len(await self._marks.ledgers())
            except (MetadataError, BKError) as exc:
                log.warning("audit interrupted (%s); retrying", exc)
                await asyncio.sleep(1)

    def _on_bookies(self, _event: WatchEvent) -> None:
        self._wake.set()

    def _on_request(self, _event: WatchEvent) -> None:
        self._audit_requested.set()
        self._wake.set()

    async def live_bookies(self) -> set[str]:
        """Registered bookies, writable or read-only (a read-only bookie still serves reads)."""
        found: set[str] = set()
        for parent in (WRITABLE_BOOKIES, READONLY_BOOKIES):
            with contextlib.suppress(MetadataError):
                found.update(await self._store.children(parent))
        return found

    async def _bookies_changed(self) -> None:
        live = await self.live_bookies()
        for bookie in self._known - live:
            if bookie not in self._grace:
                log.warning(
                    "bookie %s is gone; its ledgers are marked under-replicated if it is not back in %gs",
                    bookie,
                    self._settings.lost_bookie_recovery_delay_s,
                )
                self._grace[bookie] = asyncio.get_running_loop().create_task(self._lose_after_delay(bookie))
        for bookie in live & set(self._grace):
            log.info("bookie %s is back within the grace period: nothing to recover", bookie)
            self._grace.pop(bookie).cancel()
        self._known = live | set(self._grace)

    async def _lose_after_delay(self, bookie: str) -> None:
        await asyncio.sleep(self._settings.lost_bookie_recovery_delay_s)
        if bookie in await self.live_bookies():
            self._grace.pop(bookie, None)
            return
        marked = 0
        for ledger_id in await self._client.ledger_ids():
            metadata = await self._metadata(ledger_id)
            if metadata is not None and bookie in metadata.bookies():
                await self._marks.mark(ledger_id, Mark(lost=frozenset({bookie})))
                marked += 1
        log.warning("bookie %s is lost: %d ledgers marked under-replicated", bookie, marked)
        self._grace.pop(bookie, None)
        self._known.discard(bookie)

    async def audit(self) -> int:
        """Check every ledger; returns how many were marked."""
        live = await self.live_bookies()
        in_grace = set(self._grace)
        marked = 0
        for ledger_id in await self._client.ledger_ids():
            metadata = await self._metadata(ledger_id)
            if metadata is None:
                continue
            lost = metadata.bookies() - live - in_grace
            drain: set[str] = set()
            if self._settings.entry_level_check:
                drain = await self._missing_entries(ledger_id, metadata, live)
            if lost or drain:
                await self._marks.mark(ledger_id, Mark(lost=frozenset(lost), drain=frozenset(drain)))
                marked += 1
        log.info("audit done: %d ledgers marked under-replicated", marked)
        return marked

    async def _metadata(self, ledger_id: int) -> LedgerMetadata | None:
        try:
            return await self._client.ledger_metadata(ledger_id)
        except NoSuchLedgerError:
            return None  # deleted meanwhile

    async def _missing_entries(self, ledger_id: int, metadata: LedgerMetadata, live: set[str]) -> set[str]:
        """Live bookies that do not serve (intact) every entry they should hold."""
        if metadata.state is not LedgerState.CLOSED:
            return set()  # an open ledger's tail is still being written
        missing: set[str] = set()
        for first, last, _ in metadata.fragments(metadata.last_entry_id):
            for entry_id in range(first, last + 1):
                for bookie in metadata.write_set(entry_id):
                    if bookie not in live or bookie in missing:
                        continue
                    if not await self._holds(bookie, ledger_id, entry_id):
                        log.warning("bookie %s lacks entry %d:%d", bookie, ledger_id, entry_id)
                        missing.add(bookie)
        return missing

    async def _holds(self, bookie: str, ledger_id: int, entry_id: int) -> bool:
        try:
            connection = await self._client.pool.get(bookie)
            response = await connection.read_entry(ledger_id, entry_id)
        except BKError:
            return False
        e = response.entry
        return verify(e.ledger_id, e.entry_id, e.last_add_confirmed, e.payload, e.digest)
