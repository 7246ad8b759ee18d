"""Compaction of the broker's topics: at most one run per topic at a time, its status as Pulsar's
admin API answers it (NOT_RUN, RUNNING, SUCCESS, ERROR with the reason), and the view each topic's
``read_compacted`` cursors read (swapped in place when a compaction finishes)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from magnetar.bookie.client import BKError, LedgerClient
from magnetar.broker.compaction import compactor
from magnetar.broker.compaction.view import CompactedView
from magnetar.broker.managed_ledger import Entry, ManagedLedgerError, Position, TopicLedger
from magnetar.common.background import BackgroundTasks

log = logging.getLogger(__name__)


@dataclass
class CompactedHolder:
    """A topic's current compacted view, as its cursors hold it (CompactedEntries)."""

    view: CompactedView = field(default_factory=CompactedView)

    @property
    def horizon(self) -> Position | None:
        return self.view.horizon

    def entries_from(self, position: Position, limit: int) -> list[Entry]:
        return self.view.entries_from(position, limit)

    def entries_at(self, positions: list[Position]) -> list[Entry]:
        return self.view.entries_at(positions)

    def last_position(self) -> Position | None:
        return self.view.last_position()


class Compactions:
    def __init__(self, client: LedgerClient) -> None:
        self._client = client
        self._holders: dict[str, CompactedHolder] = {}
        self._status: dict[str, tuple[str, str]] = {}
        self._runs = BackgroundTasks()

    async def holder(self, topic: str, ledger: TopicLedger) -> CompactedHolder:
        """The view of ``topic`` (loaded from its compacted ledger when that changed, as after a
        compaction on another broker before a bundle moved here)."""
        holder = self._holders.setdefault(topic, CompactedHolder())
        cursor = ledger.cursors.get(compactor.CURSOR)
        recorded = cursor.properties.get(compactor.LEDGER_PROPERTY) if cursor is not None else None
        if recorded != holder.view.ledger_id:
            holder.view = await compactor.load(ledger, self._client)
        return holder

    def start(self, topic: str, ledger: TopicLedger) -> None:
        """Start compacting ``topic`` unless a run is under way."""
        if self._status.get(topic, ("",))[0] == "RUNNING":
            return
        self._status[topic] = ("RUNNING", "")
        self._runs.spawn(self._run(topic, ledger))

    def status(self, topic: str) -> dict[str, str]:
        state, error = self._status.get(topic, ("NOT_RUN", ""))
        return {"status": state, "lastError": error}

    async def _run(self, topic: str, ledger: TopicLedger) -> None:
        try:
            view = await compactor.compact(ledger, self._client, topic)
        except (compactor.CompactionError, ManagedLedgerError, BKError) as exc:
            log.warning("%s: compaction failed: %s", topic, exc)
            self._status[topic] = ("ERROR", str(exc))
            return
        self._holders.setdefault(topic, CompactedHolder()).view = view
        self._status[topic] = ("SUCCESS", "")

    async def close(self) -> None:
        await self._runs.wait()
