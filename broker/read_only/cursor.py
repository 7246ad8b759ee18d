"""A read-only owner's cursor: a cache of the writable owner's cursor (PIP-63).

Reading is local (the read position, what was dispatched); every acknowledgement, seek and the
unsubscribe go to the writable owner first and change the cache only once it has applied them,
so the one durable cursor of the subscription lives at the writable owner whichever broker the
consumers use. Partial batch acknowledgements stay local (as on a writable broker, in memory).
"""

from __future__ import annotations

from collections.abc import Iterable

from magnetar.broker.managed_ledger import ManagedCursor, Position
from magnetar.broker.managed_ledger.cursor import CursorLedger
from magnetar.broker.read_only.cursor_client import CursorClient
from magnetar.proto import broker_pb2 as pb


class RemoteCursor(ManagedCursor):
    def __init__(self, ledger: CursorLedger, name: str, rpc: CursorClient, topic: str) -> None:
        super().__init__(ledger, name, durable=True)
        self._rpc = rpc
        self._topic = topic

    def apply(self, state: pb.CursorState) -> None:
        """Replace the cache with the writable owner's state."""
        mark = Position(state.mark_delete.ledger_id, state.mark_delete.entry_id)
        acked = [
            (Position(a.first.ledger_id, a.first.entry_id), Position(a.last.ledger_id, a.last.entry_id))
            for a in state.acked
        ]
        self.restore(mark, acked)

    async def refresh(self) -> None:
        """Read the cursor from the writable owner (a consumer connects: acks made elsewhere count)."""
        self.apply(await self._rpc.get(self._topic, self.name))

    async def delete(self, positions: Iterable[Position]) -> None:
        wanted = [p for p in positions if p > self.mark_delete_position]
        if not wanted:
            return
        await self._rpc.acknowledge(self._topic, self.name, wanted, cumulative=False)
        await super().delete(wanted)

    async def mark_delete(self, position: Position, properties: dict[str, int] | None = None) -> None:
        if position <= self.mark_delete_position:
            return
        await self._rpc.acknowledge(self._topic, self.name, [position], cumulative=True)
        await super().mark_delete(position, properties)

    async def seek(self, position: Position) -> None:
        target = self.ledger.valid_position(position)
        await self._rpc.seek(self._topic, self.name, target)
        self.reset_to(Position(target.ledger_id, target.entry_id - 1))

    def _changed(self) -> None:
        return  # persisted by the writable owner, never from here: nothing to schedule

    async def flush(self) -> None:
        return

    async def create(self) -> None:
        return

    async def load(self) -> None:
        self.apply(await self._rpc.get(self._topic, self.name))
