"""What a rolling restart asks of the running cluster before it takes the next pod down.

Two small interfaces, so the restart logic does not care how the answer is found:

- :class:`ReplicationGate` — how many ledgers are under-replicated now; a bookie is restarted only
  when none is (the last restart's ledgers are whole again). The default reads the
  ``/underreplicated`` marks the auditor keeps in the region's metadata store. It also
  decommissions the bookies a scale-down removed, as BookKeeper's ``decommissionbookie`` does
  once a bookie is stopped: every ledger that still names one is marked for re-replication at once
  (not after the auditor's ``lost_bookie_recovery_delay``), so the cluster is not called Ready
  while a ledger holds fewer copies than its write quorum.
- :class:`Drainer` — move a broker's bundles to other brokers before its pod goes, so clients
  are redirected instead of waiting out a reconnect backoff. The default finds the broker's
  bundles in the ownership records and transfers each through the admin REST.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from magnetar.bookie.autorecovery.marks import Mark, UnderReplication
from magnetar.bookie.client import BKError
from magnetar.bookie.client.ledger_manager import LedgerManager
from magnetar.bookie.layout import UNDER_REPLICATED
from magnetar.common.metadata import MetadataStore, NoNodeError, open_store
from magnetar.operator import configs
from magnetar.operator.admin import AdminClient, AdminError
from magnetar.operator.cluster_secrets import AdminAccess
from magnetar.operator.manifests import admin_url
from magnetar.operator.resources import ClusterSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterRef:
    name: str
    namespace: str
    spec: ClusterSpec
    #: the superuser token and CA of a cluster the operator runs (security.Keeper.admin_access)
    access: AdminAccess = field(default_factory=AdminAccess, repr=False)

    @property
    def metadata_url(self) -> str:
        return configs.metadata_url(self.spec, self.name, self.namespace)

    @property
    def region(self) -> str:
        return self.spec.region(self.name)

    def admin(self) -> AdminClient:
        return AdminClient(admin_url(self.spec, self.name, self.namespace), access=self.access)


class ReplicationGate(Protocol):
    async def under_replicated(self, cluster: ClusterRef) -> int: ...

    async def decommission(self, cluster: ClusterRef, replicas: int) -> int:
        """Mark for re-replication every ledger naming a bookie of ordinal ``replicas`` or above
        (gone by a scale-down); how many ledgers were marked."""
        ...


class Drainer(Protocol):
    async def drain(self, cluster: ClusterRef, pod: dict[str, Any]) -> list[str]:
        """Move every bundle the pod's broker owns elsewhere; returns the bundles moved."""
        ...


class MetadataReplicationGate:
    """Counts the auditor's under-replication marks in the region's metadata store."""

    async def under_replicated(self, cluster: ClusterRef) -> int:
        store = await open_store(cluster.metadata_url)
        try:
            return len(await store.children(UNDER_REPLICATED))
        except NoNodeError:
            return 0
        finally:
            await store.close()

    async def decommission(self, cluster: ClusterRef, replicas: int) -> int:
        store = await open_store(cluster.metadata_url)
        try:
            manager, marks = LedgerManager(store), UnderReplication(store)
            marked = 0
            for ledger_id in await manager.ledger_ids():
                try:
                    bookies = (await manager.read(ledger_id)).metadata.bookies()
                except BKError:
                    continue  # deleted since the listing
                leaving = frozenset(b for b in bookies if _at_or_above(bookie_ordinal(cluster, b), replicas))
                if not leaving:
                    continue
                marked += 1
                found = await marks.get(ledger_id)
                if found is None or not leaving <= found[0].drain:  # marked already: not again
                    await marks.mark(ledger_id, Mark(drain=leaving))
            if marked:
                log.info(
                    "%s: %d ledger(s) on removed bookies marked for re-replication", cluster.name, marked
                )
            return marked
        finally:
            await store.close()


def _at_or_above(ordinal: int | None, replicas: int) -> bool:
    return ordinal is not None and ordinal >= replicas


def bookie_ordinal(cluster: ClusterRef, bookie: str) -> int | None:
    """The ordinal of the cluster's bookie pod whose id (its stable DNS name and port, as the
    image's entrypoint advertises it) is ``bookie``; None for any other id."""
    host, _, port = bookie.rpartition(":")
    pod, dot, domain = host.partition(".")
    prefix = f"{cluster.name}-bookie-"
    if not dot or domain != f"{cluster.name}-bookie.{cluster.namespace}.svc" or not pod.startswith(prefix):
        return None
    number = pod.removeprefix(prefix)
    return int(number) if number.isdigit() and port == str(configs.BOOKIE_PORT) else None


def broker_id(cluster: ClusterRef, pod: dict[str, Any]) -> str:
    """The id the pod's broker registers under: its advertised (stable DNS) address and port."""
    service = f"{cluster.name}-broker-headless"
    return f"{pod['metadata']['name']}.{service}.{cluster.namespace}.svc:{configs.BROKER_PORT}"


class AdminDrainer:
    """Transfers a broker's bundles, found in the ownership records, through the admin REST."""

    async def drain(self, cluster: ClusterRef, pod: dict[str, Any]) -> list[str]:
        return await self.drain_broker(cluster, broker_id(cluster, pod))

    async def drain_broker(self, cluster: ClusterRef, me: str) -> list[str]:
        """Transfer every bundle broker ``me`` owns, spread over the region's other brokers."""
        store = await open_store(cluster.metadata_url)
        try:
            owned = await owned_bundles(store, me)
        finally:
            await store.close()
        if not owned:
            return []
        admin = cluster.admin()
        others = [b for b in await admin.brokers(cluster.region) if b != me]
        moved = []
        for i, (namespace, bundle) in enumerate(owned):
            destination = others[i % len(others)] if others else None
            try:
                await admin.unload(namespace, bundle, destination)
            except AdminError as exc:
                # A bundle that moved meanwhile is already off this broker: nothing lost.
                log.warning("draining %s of %s: %s", bundle, namespace, exc)
                continue
            moved.append(f"{namespace}/{bundle}")
        return moved


async def owned_bundles(store: MetadataStore, broker: str) -> list[tuple[str, str]]:
    """``(tenant/namespace, bundle)`` of every ownership record naming ``broker``."""
    return (await ownership(store)).get(broker, [])


async def ownership(store: MetadataStore) -> dict[str, list[tuple[str, str]]]:
    """Every ownership record: broker id -> the ``(tenant/namespace, bundle)`` it owns."""
    found: dict[str, list[tuple[str, str]]] = {}
    for tenant in await _children(store, "/namespace"):
        for ns in await _children(store, f"/namespace/{tenant}"):
            for bundle in await _children(store, f"/namespace/{tenant}/{ns}"):
                try:
                    data, _ = await store.get(f"/namespace/{tenant}/{ns}/{bundle}")
                except NoNodeError:
                    continue
                owner = json.loads(data).get("brokerId")
                if owner:
                    found.setdefault(str(owner), []).append((f"{tenant}/{ns}", bundle))
    return found


async def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return await store.children(path)
    except NoNodeError:
        return []
