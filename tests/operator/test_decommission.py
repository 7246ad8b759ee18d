"""Decommissioning the bookies a scale-down removed (operator/gates.py), on a real metadata store:
every ledger that still names a bookie of ordinal ``replicas`` or above is marked for
re-replication at once (a ``drain`` mark, which the replication workers act on even while the
bookie's id is unknown, without the auditor's lost-bookie delay), and those marks are what the
gate then counts as under-replicated — so neither Ready nor the next scale-down step comes before
the copies are made again."""

from __future__ import annotations

import asyncio

from magnetar.bookie.autorecovery.marks import UnderReplication
from magnetar.bookie.client.ledger_manager import LedgerManager
from magnetar.bookie.client.ledger_metadata import LedgerMetadata
from magnetar.common.metadata import open_store
from magnetar.operator.gates import ClusterRef, MetadataReplicationGate, bookie_ordinal
from magnetar.operator.resources import ClusterSpec


def bookie(i: int, name: str = "shrink") -> str:
    return f"{name}-bookie-{i}.{name}-bookie.default.svc:3181"


def cluster(url: str) -> ClusterRef:
    spec = ClusterSpec.model_validate({})
    spec.metadata_store.url = url  # an in-process store; the CRD admits only zk:// URLs
    return ClusterRef("shrink", "default", spec)


def test_bookie_ordinals_are_read_from_this_clusters_bookie_ids_only() -> None:
    ref = cluster("memory:ordinals")
    assert bookie_ordinal(ref, bookie(3)) == 3
    assert bookie_ordinal(ref, bookie(12)) == 12
    assert bookie_ordinal(ref, bookie(3, "other")) is None
    assert bookie_ordinal(ref, "shrink-bookie-3.shrink-bookie.elsewhere.svc:3181") is None
    assert bookie_ordinal(ref, "127.0.0.1:3181") is None


def test_ledgers_on_removed_bookies_are_marked_once_and_counted_until_re_replicated() -> None:
    async def scenario() -> None:
        url = "memory:decommission"
        ref, gate = cluster(url), MetadataReplicationGate()
        store = await open_store(url)
        try:
            manager, marks = LedgerManager(store), UnderReplication(store)
            ensembles = {
                1: (bookie(0), bookie(3)),  # on the removed bookie-3
                2: (bookie(0), bookie(1)),
                3: (bookie(4), bookie(2)),  # on bookie-4, also gone (4 -> 3 after 5 -> 4)
                4: (bookie(0), bookie(5, "other")),  # another cluster's ordinal 5: not ours
            }
            for ledger_id, ensemble in ensembles.items():
                await manager.create(ledger_id, LedgerMetadata(2, 2, 2, ((0, ensemble),)))

            assert await gate.under_replicated(ref) == 0
            assert await gate.decommission(ref, 3) == 2
            found = await marks.all()
            assert sorted(found) == [1, 3]
            assert found[1].drain == {bookie(3)}
            assert found[3].drain == {bookie(4)}
            assert await gate.under_replicated(ref) == 2  # so the roller waits

            # Asked again while re-replication runs: nothing re-written.
            versions = {i: (await marks.get(i) or (None, -1))[1] for i in (1, 3)}
            assert await gate.decommission(ref, 3) == 2
            assert {i: (await marks.get(i) or (None, -1))[1] for i in (1, 3)} == versions

            # A worker replaced bookie-3 in ledger 1 and cleared its mark: ledger 1 is done.
            current = await manager.read(1)
            moved = LedgerMetadata(2, 2, 2, ((0, (bookie(0), bookie(2))),))
            await manager.write(1, moved, current.version)
            mark = await marks.get(1)
            assert mark is not None
            assert await marks.release(1, mark[1])
            assert await gate.decommission(ref, 3) == 1

            # With 5 bookies wanted nothing is removed: nothing marked.
            assert await gate.decommission(cluster("memory:decommission"), 5) == 0
        finally:
            await store.close()

    asyncio.run(scenario())
