"""``magnetar shell``: inspect the storage layer, in the shape of ``bookkeeper shell``.

Read-only: listing bookies and ledgers, showing ledger metadata, reading entries without recovery
(so a ledger being written is never fenced by looking at it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from magnetar.bookie.client import BKError, LedgerClient
from magnetar.common.metadata import open_store

console = Console()

_metadata_option = click.option(
    "--metadata-service-uri",
    "-m",
    envvar="MAGNETAR_METADATA_SERVICE_URI",
    required=True,
    help="Metadata store of the cluster, e.g. zk://127.0.0.1:2181/magnetar "
    "(env MAGNETAR_METADATA_SERVICE_URI).",
)


@asynccontextmanager
async def _client(uri: str) -> AsyncIterator[LedgerClient]:
    store = await open_store(uri)
    try:
        async with LedgerClient(store) as client:
            yield client
    finally:
        await store.close()


def _run(uri: str, action: Callable[[LedgerClient], Awaitable[None]]) -> None:
    async def main() -> None:
        async with _client(uri) as client:
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
  magnetar shell -m zk://127.0.0.1:2181/magnetar readledger 12 --first 0 --last 9""",
)
@_metadata_option
@click.pass_context
def shell(ctx: click.Context, metadata_service_uri: str) -> None:
    """Inspect bookies and ledgers (like `bookkeeper shell`)."""
    ctx.obj = metadata_service_uri


@shell.command("listbookies")
@click.option("--readwrite", "-rw", "only", flag_value="rw", help="Only writable bookies.")
@click.option("--readonly", "-ro", "only", flag_value="ro", help="Only read-only bookies.")
@click.pass_obj
def list_bookies(uri: str, only: str | None) -> None:
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

    _run(uri, action)


@shell.command("listledgers")
@click.pass_obj
def list_ledgers(uri: str) -> None:
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

    _run(uri, action)


@shell.command("ledgermetadata")
@click.argument("ledger_id", type=int)
@click.pass_obj
def ledger_metadata(uri: str, ledger_id: int) -> None:
    """Print a ledger's metadata as JSON: state, quorums, ensembles by first entry."""

    async def action(client: LedgerClient) -> None:
        md = await client.ledger_metadata(ledger_id)
        doc: dict[str, Any] = json.loads(md.encode())
        doc["ledger_id"] = ledger_id
        console.print_json(data=doc)

    _run(uri, action)


@shell.command("readledger")
@click.argument("ledger_id", type=int)
@click.option("--first", type=int, default=0, show_default=True, help="First entry id.")
@click.option("--last", type=int, default=None, help="Last entry id (default: the LAC).")
@click.option("--hex/--text", "as_hex", default=False, help="Print payloads as hex instead of text.")
@click.pass_obj
def read_ledger(uri: str, ledger_id: int, first: int, last: int | None, as_hex: bool) -> None:
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

    _run(uri, action)
