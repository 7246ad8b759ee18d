"""Batch reads: many entries of one ledger from each bookie in a call (BookKeeper's batch read).

A range read entry by entry costs a round trip and a request on both sides per entry; asked in
batches, a bookie serves a few hundred entries for about the cost of one. Each entry is asked of
its first replica, and what that bookie did not serve (missing, corrupt, a failed call) of its
next replica, and so on: a lost bookie costs one failed call per batch, not one per entry. An
entry no replica served in a batch is left to the caller, which reads it alone for a precise
error (see read_handle.EntryReader).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from magnetar.bookie.client.bookie_connection import BookieConnectionPool
from magnetar.bookie.client.errors import BKError
from magnetar.bookie.digest import verify
from magnetar.proto import bookie_pb2 as pb

#: entries asked of one bookie in one call
BATCH_ENTRIES = 256

Replicas = Callable[[int], list[str]]


async def read_batched(
    pool: BookieConnectionPool,
    ledger_id: int,
    replicas: Replicas,
    entry_ids: list[int],
    *,
    master_key: bytes = b"",
) -> dict[int, pb.Entry]:
    """The entries of ``entry_ids`` that some replica (``replicas(entry_id)``, in the order to ask
    them) served intact, by entry id; an entry no batch served is absent."""
    served: dict[int, pb.Entry] = {}
    left = list(entry_ids)
    turn = 0
    while left:
        by_bookie: dict[str, list[int]] = {}
        for entry_id in left:
            candidates = replicas(entry_id)
            if turn < len(candidates):
                by_bookie.setdefault(candidates[turn], []).append(entry_id)
        if not by_bookie:
            break

        async def from_bookie(bookie: str, ids: list[int]) -> None:
            for start in range(0, len(ids), BATCH_ENTRIES):
                chunk = ids[start : start + BATCH_ENTRIES]
                served.update(await _from_bookie(pool, bookie, ledger_id, chunk, master_key))

        await asyncio.gather(*(from_bookie(bookie, ids) for bookie, ids in by_bookie.items()))
        left = [e for e in left if e not in served]
        turn += 1
    return served


async def _from_bookie(
    pool: BookieConnectionPool, bookie: str, ledger_id: int, asked: list[int], master_key: bytes
) -> dict[int, pb.Entry]:
    """What one bookie serves intact of ``asked``, asking again for what its byte limit left;
    nothing more once a call fails."""
    served: dict[int, pb.Entry] = {}
    while asked:
        try:
            connection = await pool.get(bookie)
            response = await connection.read_entries(ledger_id, asked, master_key=master_key)
        except BKError:
            return served
        position = {entry_id: i for i, entry_id in enumerate(asked)}
        answered = -1
        for entry in response.entries:
            at = position.get(entry.entry_id)
            if at is None or entry.ledger_id != ledger_id:
                continue
            answered = max(answered, at)
            if verify(entry.ledger_id, entry.entry_id, entry.last_add_confirmed, entry.payload, entry.digest):
                served[entry.entry_id] = entry
        for failure in response.failed:
            answered = max(answered, position.get(failure.entry_id, -1))
        if answered < 0:
            return served  # a bookie that answers nothing it was asked is not asked again
        asked = asked[answered + 1 :]
    return served
