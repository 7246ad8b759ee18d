"""``magnetar shell``: inspect the storage layer, in the shape of ``bookkeeper shell``.

Read-only: listing bookies and ledgers, showing ledger metadata, reading entries without recovery
(so a ledger being written is never fenced by looking at it).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from magnetar.bookie.autorecovery.marks import Mark, UnderReplication
from magnetar.bookie.client import BKError, LedgerClient, LedgerClientConfig
from magnetar.bookie.layout import AUDIT_REQUESTED
from magnetar.common.metadata import open_store
from magnetar.common.tls import TlsFiles

console = Console()

_metadata_option = click.option(
    "--metadata-service-uri",
    "-m",
    envvar="MAGNETAR_METADATA_SERVICE_URI",
    required=True,
    help="Metadata store of the cluster, e.g. zk://127.0.0.1:2181/magnetar "
    "(env MAGNETAR_METADATA_SERVICE_URI).",
)


def _tls_option(name: str, setting: str, what: str) -> Callable[[click.decorators.FC], click.decorators.FC]:
    # The bookie's own settings and environment variables: on a bookie's host the shell then
    # talks to the bookies as that bookie does.
    return click.option(
        name,
        setting,
        envvar=f"MAGNETAR_BOOKIE_{setting.upper()}",
        default="",
        help=f"{what} (PEM; env MAGNETAR_BOOKIE_{setting.upper()}).",
    )


@dataclass(frozen=True)
class _Target:
    """The cluster a command inspects: its metadata store, and TLS to its bookies (None: plain)."""

    uri: str
    tls: TlsFiles | None


@asynccontextmanager
async def _client(target: _Target) -> AsyncIterator[LedgerClient]:
    store = await open_store(target.uri)
    try:
        async with LedgerClient(store, LedgerClientConfig(tls=target.tls)) as client:
            yield client
    finally:
        await store.close()


def _run(target: _Target, action: Callable[[LedgerClient], Awaitable[None]]) -> None:
    async def main() -> None:
        async with _client(target) as client:
            await action(client)

    try:
        asyncio.run(main())
    except (BKError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar shell -m zk://127.0.0.1:2181/magnetar listbookies
  magnetar shell -m zk://127.0.0.1:2181/magnetar listledgers
  magnetar shell -m zk://127.0.0.1:2181/magnetar ledgermetadata 12
  magnetar shell -m zk://127.0.0.1:2181/magnetar readledger 12 --first 0 --last 9
  magnetar shell -m zk://127.0.0.1:2181/magnetar listunderreplicated
  magnetar shell -m zk://127.0.0.1:2181/magnetar triggeraudit
  magnetar shell -m zk://127.0.0.1:2181/magnetar decommissionbookie 127.0.0.1:3181
  magnetar shell -m zk://127.0.0.1:2181/magnetar --tls-trust-store-path ca.pem \\
      --tls-certificate-path admin.cert.pem --tls-key-path admin.key.pem readledger 12""",
)
@_metadata_option
@_tls_option(
    "--tls-trust-store-path", "tls_trust_store_path", "CAs of the bookies' certificates; set: TLS to them"
)
@_tls_option("--tls-certificate-path", "tls_certificate_path", "Certificate proved to the bookies")
@_tls_option("--tls-key-path", "tls_key_path", "Key of --tls-certificate-path")
@click.pass_context
def shell(
    ctx: click.Context,
    metadata_service_uri: str,
    tls_trust_store_path: str,
    tls_certificate_path: str,
    tls_key_path: str,
) -> None:
    """Inspect bookies and ledgers (like `bookkeeper shell`)."""
    tls = TlsFiles(tls_certificate_path, tls_key_path, tls_trust_store_path)
    ctx.obj = _Target(metadata_service_uri, tls if tls.trust_certs else None)


@shell.command("listbookies")
@click.option("--readwrite", "-rw", "only", flag_value="rw", help="Only writable bookies.")
@click.option("--readonly", "-ro", "only", flag_value="ro", help="Only read-only bookies.")
@click.pass_obj
def list_bookies(target: _Target, only: str | None) -> None:
    """List the registered bookies and whether they accept writes."""

    async def action(client: LedgerClient) -> None:
        table = Table("bookie id", "address", "rack", "state")
        if only != "ro":
            for r in await client.directory.writable():
                table.add_row(r.bookie_id, r.address, r.rack, "writable")
        if only != "rw":
            for r in await client.directory.read_only():
                table.add_row(r.bookie_id, r.address, r.rack, "read-only")
        console.print(table)

    _run(target, action)


@shell.command("listledgers")
@click.pass_obj
def list_ledgers(target: _Target) -> None:
    """List ledger ids with their state and size."""

    async def action(client: LedgerClient) -> None:
        table = Table("ledger", "state", "E/Qw/Qa", "last entry", "bytes")
        for ledger_id in await client.ledger_ids():
            try:
                md = await client.ledger_metadata(ledger_id)
            except BKError:
                continue  # deleted since the listing
            quorums = f"{md.ensemble_size}/{md.write_quorum}/{md.ack_quorum}"
            table.add_row(str(ledger_id), md.state.value, quorums, str(md.last_entry_id), str(md.length))
        console.print(table)

    _run(target, action)


@shell.command("ledgermetadata")
@click.argument("ledger_id", type=int)
@click.pass_obj
def ledger_metadata(target: _Target, ledger_id: int) -> None:
    """Print a ledger's metadata as JSON: state, quorums, ensembles by first entry."""

    async def action(client: LedgerClient) -> None:
        md = await client.ledger_metadata(ledger_id)
        doc: dict[str, Any] = json.loads(md.encode())
        doc.pop("password")  # a secret: printed nowhere
        doc["ledger_id"] = ledger_id
        console.print_json(data=doc)

    _run(target, action)


@shell.command("readledger")
@click.argument("ledger_id", type=int)
@click.option("--first", type=int, default=0, show_default=True, help="First entry id.")
@click.option("--last", type=int, default=None, help="Last entry id (default: the LAC).")
@click.option("--hex/--text", "as_hex", default=False, help="Print payloads as hex instead of text.")
@click.pass_obj
def read_ledger(target: _Target, ledger_id: int, first: int, last: int | None, as_hex: bool) -> None:
    """Print entries of a ledger, up to its LAC, without fencing it."""

    async def action(client: LedgerClient) -> None:
        reader = await client.open_ledger_no_recovery(ledger_id)
        end = reader.last_add_confirmed if last is None else last
        if end < first:
            console.print(
                f"ledger {ledger_id}: no confirmed entries from {first} (LAC {reader.last_add_confirmed})"
            )
            return
        for entry in await reader.read(first, end):
            body = entry.payload.hex() if as_hex else entry.payload.decode("utf-8", "backslashreplace")
            console.print(f"{ledger_id}:{entry.entry_id}\t{len(entry.payload)} B\t{body}", markup=False)

    _run(target, action)


@shell.command("listunderreplicated")
@click.pass_obj
def list_under_replicated(target: _Target) -> None:
    """List ledgers marked under-replicated, with the bookies to replace and since when."""

    async def action(client: LedgerClient) -> None:
        marks = await UnderReplication(client.store).all()
        table = Table("ledger", "lost bookies", "draining", "marked")
        for ledger_id, mark in sorted(marks.items()):
            since = datetime.fromtimestamp(mark.marked_ms / 1000, UTC).isoformat(timespec="seconds")
            table.add_row(str(ledger_id), ", ".join(sorted(mark.lost)), ", ".join(sorted(mark.drain)), since)
        console.print(table)
        console.print(f"{len(marks)} under-replicated ledgers")

    _run(target, action)


@shell.command("triggeraudit")
@click.pass_obj
def trigger_audit(target: _Target) -> None:
    """Ask the auditor to check every ledger now instead of at its next period."""

    async def action(client: LedgerClient) -> None:
        await client.store.put(AUDIT_REQUESTED, str(time.time_ns()).encode())
        console.print("audit requested; the auditor checks every ledger now")

    _run(target, action)


@shell.command("decommissionbookie")
@click.argument("bookie_id")
@click.option("--timeout", "timeout_s", type=float, default=3600, show_default=True, help="Seconds to wait.")
@click.pass_obj
def decommission_bookie(target: _Target, bookie_id: str, timeout_s: float) -> None:
    """Move every copy held by a stopped bookie elsewhere, then return.

    As in BookKeeper, stop the bookie first: its ledgers are marked for re-replication at once
    (no grace period), and the command waits, with progress, until no ledger uses it any more.
    """

    async def action(client: LedgerClient) -> None:
        live = {
            r.bookie_id for r in [*await client.directory.writable(), *await client.directory.read_only()]
        }
        if bookie_id in live:
            raise click.ClickException(
                f"bookie {bookie_id} is still running: stop it before decommissioning it"
            )
        await drain(client, bookie_id, timeout_s)

    _run(target, action)


async def _ledgers_using(client: LedgerClient, bookie_id: str) -> list[int]:
    using = []
    for ledger_id in await client.ledger_ids():
        try:
            if bookie_id in (await client.ledger_metadata(ledger_id)).bookies():
                using.append(ledger_id)
        except BKError:
            continue  # deleted since the listing
    return using


async def drain(client: LedgerClient, bookie_id: str, timeout_s: float) -> None:
    marks = UnderReplication(client.store)
    using = await _ledgers_using(client, bookie_id)
    for ledger_id in using:
        await marks.mark(ledger_id, Mark(drain=frozenset({bookie_id})))
    deadline = time.monotonic() + timeout_s
    with Progress(console=console) as progress:
        total = len(using)
        task = progress.add_task(f"re-replicating {bookie_id}", total=total)
        while using:
            if time.monotonic() > deadline:
                raise click.ClickException(
                    f"{len(using)} ledgers still use {bookie_id} after {timeout_s:.0f}s"
                )
            await asyncio.sleep(1)
            using = await _ledgers_using(client, bookie_id)
            progress.update(task, completed=total - len(using))
    console.print(f"bookie {bookie_id} decommissioned: no ledger uses it")
