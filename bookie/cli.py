"""``magnetar bookie``: run one storage node until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from magnetar.bookie.config import BookieConfig
from magnetar.common import heap
from magnetar.common.config import ConfigError
from magnetar.common.process import parse_sets, run, setup_logging, stop_on_signals

log = logging.getLogger("magnetar.bookie")

#: the line a harness waits for; the address is the one clients use (the actual port with port 0)
READY_PREFIX = "bookie ready"
#: past shutdown_timeout_ms, how long the process may take to exit before it is ended
_EXIT_MARGIN_S = 5.0


@click.command(
    epilog="""\b
Examples:
  magnetar bookie --config bookie.yaml
  magnetar bookie --port 0 --journal-dir /tmp/b1/journal --ledger-dir /tmp/b1/ledgers
  magnetar bookie --config bookie.yaml --metadata-service-uri zk://127.0.0.1:2181/magnetar
  magnetar bookie --config bookie.yaml --set journal_sync_data=false --set flush_interval=1000

\b
Settings are BookKeeper's in snake_case (bookie_port, journal_directory, ledger_directories,
journal_sync_data, disk_usage_threshold, gc_wait_time, ...); environment variables
MAGNETAR_BOOKIE_<SETTING> override the file, flags override both. Once serving, the bookie prints
"bookie ready <address> id=<bookie id>" on stdout.""",
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), help="YAML file.")
@click.option("--port", type=int, help="gRPC port (bookie_port); 0 picks a free one.")
@click.option("--journal-dir", help="Journal directory (journal_directory).")
@click.option("--ledger-dir", multiple=True, help="Ledger directory (ledger_directories); repeatable.")
@click.option("--metadata-service-uri", help="zk://host:port/chroot or memory://name.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Any setting; repeatable.")
@click.option("--log-level", default="INFO", show_default=True, help="Python logging level.")
def bookie(
    config_path: Path | None,
    port: int | None,
    journal_dir: str | None,
    ledger_dir: tuple[str, ...],
    metadata_service_uri: str | None,
    sets: tuple[str, ...],
    log_level: str,
) -> None:
    """Run a bookie: the BookKeeper-style storage node that keeps ledger entries."""
    setup_logging(log_level)
    overrides = parse_sets(sets)
    overrides.update(
        {
            "bookie_port": port,
            "journal_directory": journal_dir,
            "ledger_directories": list(ledger_dir) or None,
            "metadata_service_uri": metadata_service_uri,
        }
    )
    try:
        config = BookieConfig.load(config_path, overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    run(_serve(config))


async def _serve(config: BookieConfig) -> None:
    from magnetar.bookie.server import start_bookie

    try:
        server = await start_bookie(config)
    except Exception as exc:
        log.error("bookie failed to start: %s", exc)
        raise SystemExit(1) from exc
    bound_s = config.shutdown_timeout_ms / 1000
    # BookieServer.stop keeps within the bound; the last resort covers what it cannot see, a
    # stuck event loop included
    stop_on_signals(server.request_stop, bound_s + _EXIT_MARGIN_S, "bookie")
    if server.metrics_port:
        click.echo(f"bookie metrics http://{config.listen_address}:{server.metrics_port}/metrics")
    heap.settle()
    click.echo(f"{READY_PREFIX} {server.address} id={server.bookie_id}")
    sys.stdout.flush()
    await server.wait_stopped()
