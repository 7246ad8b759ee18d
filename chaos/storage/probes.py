"""Probes on a region's storage: registered bookies and under-replicated ledgers, read from the
region's metadata store as recorded by ``magnetar local up``."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

from chaoslib.exceptions import ActivityFailed

from magnetar.bookie.autorecovery.marks import UnderReplication
from magnetar.bookie.layout import READONLY_BOOKIES, WRITABLE_BOOKIES
from magnetar.chaos.pods import is_kube
from magnetar.chaos.process import targets
from magnetar.common.metadata import MetadataError, open_store

__all__ = ["registered_bookies", "under_replicated_ledgers", "wait_for_full_replication"]


def _metadata_url(region: str, cluster_dir: str | None, configuration: dict[str, Any] | None) -> str:
    state = targets.load(targets.cluster_dir(cluster_dir, configuration))
    try:
        return state.regions[region]["metadata_store"]
    except KeyError:
        raise ActivityFailed(
            f"no region {region!r} in {state.directory} (has {sorted(state.regions)})"
        ) from None


async def _count(url: str, parent: str | None) -> int:
    store = await open_store(url, session_timeout_s=10)
    try:
        if parent is None:
            return len(await UnderReplication(store).ledgers())
        return len(await store.children(parent)) if await store.exists(parent) else 0
    finally:
        await store.close()


def under_replicated_ledgers(
    region: str, cluster_dir: str | None = None, configuration: dict[str, Any] | None = None
) -> int:
    """How many ledgers of the region are marked under-replicated right now."""
    try:
        return asyncio.run(_count(_metadata_url(region, cluster_dir, configuration), None))
    except MetadataError as exc:
        raise ActivityFailed(f"cannot read the metadata store of {region}: {exc}") from exc


def registered_bookies(
    region: str,
    writable_only: bool = True,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> int:
    """How many bookies of the region are registered (writable ones, or all)."""
    url = _metadata_url(region, cluster_dir, configuration)
    count = asyncio.run(_count(url, WRITABLE_BOOKIES))
    return count if writable_only else count + asyncio.run(_count(url, READONLY_BOOKIES))


def wait_for_full_replication(
    region: str,
    timeout_s: float = 300,
    settle_s: float = 0,
    cluster_dir: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Wait until no ledger of the region is under-replicated and return how long recovery took,
    for the post-mortem. ``settle_s`` is the time the auditor needs to notice a loss, waited
    first; on a local cluster the wait ends as soon as the region's auditor logs its verdict on
    a bookie (lost, its ledgers marked, or back in time), which is what the time was for."""
    started = time.time()
    _await_audit(region, settle_s, cluster_dir, configuration)
    seen_marks = 0
    while True:
        count = under_replicated_ledgers(region, cluster_dir, configuration)
        seen_marks = max(seen_marks, count)
        if count == 0:
            return {
                "started": started,
                "recovered": time.time(),
                "seconds": time.time() - started,
                "peak": seen_marks,
            }
        if time.time() - started > timeout_s:
            raise ActivityFailed(f"{count} ledgers of {region} still under-replicated after {timeout_s:.0f}s")
        time.sleep(0.5)


#: what the auditor (magnetar.bookie.autorecovery.auditor) logs once it has decided on a missing
#: bookie: lost (after every mark is written) or back within its grace period; or, when the lost
#: bookie was the auditor, its successor's first full audit once it marked something (an audit
#: that marked nothing may have run before the loss showed)
_AUDIT_VERDICT = re.compile(r" is lost: | is back within the grace period|audit done: [1-9]")


def _await_audit(
    region: str, settle_s: float, cluster_dir: str | None, configuration: dict[str, Any] | None
) -> None:
    """Up to ``settle_s``, until one of the region's bookies logs an audit verdict from now on.
    Pods' logs are not files here, and a verdict given before this wait began is not seen: both
    wait the whole ``settle_s``, as they always did."""
    deadline = time.monotonic() + settle_s
    path = targets.cluster_dir(cluster_dir, configuration)
    logs: dict[Path, int] = {}
    if not is_kube(path):
        for record in targets.load(path).processes:
            if record.role == "bookie" and record.region == region and record.log:
                log = Path(record.log)
                logs[log] = log.stat().st_size if log.exists() else 0
    while time.monotonic() < deadline:
        for log, position in logs.items():
            try:
                with log.open("rb") as file:
                    file.seek(position)
                    text = file.read().decode(errors="replace")
            except OSError:
                continue
            if _AUDIT_VERDICT.search(text):
                return
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
