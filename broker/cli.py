"""``magnetar broker``: run one broker until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from magnetar.broker.config import BrokerConfig
from magnetar.common import heap
from magnetar.common.config import ConfigError
from magnetar.common.metadata import MetadataStore
from magnetar.common.process import parse_sets, run, setup_logging, stop_on_signals

if TYPE_CHECKING:  # the service is imported when a broker runs, not for --help
    from magnetar.broker.service import BrokerService

log = logging.getLogger("magnetar.broker")

#: the line a harness waits for
READY_PREFIX = "broker ready"
#: of broker_shutdown_timeout_ms, kept for closing the metadata-store sessions when the graceful
#: steps overrun
_CLOSE_RESERVE_S = 3.0
#: past broker_shutdown_timeout_ms, how long the process may take to exit before it is ended
_EXIT_MARGIN_S = 5.0


@click.command(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar broker --config broker.yaml
  magnetar broker --metadata-store-url zk://127.0.0.1:2181/jp-east --port 6650 --web-port 8080
  magnetar broker --config broker.yaml --set broker_deduplication_enabled=true
  magnetar broker --config broker.yaml --read-only --port 6651   # PIP-63 read-only pool

\b
Settings are Pulsar's broker.conf names in snake_case (cluster_name, metadata_store_url,
broker_service_port, web_service_port, max_message_size, managed_ledger_default_ensemble_size,
...); MAGNETAR_BROKER_<SETTING> variables override the file, flags override both. Once serving,
the broker prints "broker ready <address> service_url=pulsar://... web_service_url=http://...".""",
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), help="YAML file.")
@click.option("--metadata-store-url", help="zk://host:port/chroot, sqlite:///path or memory://name.")
@click.option("--port", type=int, help="Pulsar protocol port (broker_service_port); 0 picks a free one.")
@click.option("--web-port", type=int, help="HTTP port for /metrics and admin (web_service_port).")
@click.option(
    "--read-only",
    "read_only",
    is_flag=True,
    default=None,
    help="Join the read-only pool (read_only_broker): serve consumers only (PIP-63).",
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Any setting; repeatable.")
@click.option("--log-level", default="INFO", show_default=True, help="Python logging level.")
def broker(
    config_path: Path | None,
    metadata_store_url: str | None,
    port: int | None,
    web_port: int | None,
    read_only: bool | None,
    sets: tuple[str, ...],
    log_level: str,
) -> None:
    """Run a broker: the Pulsar binary protocol over managed ledgers on bookies."""
    setup_logging(log_level)
    overrides = parse_sets(sets)
    overrides.update(
        {"metadata_store_url": metadata_store_url, "broker_service_port": port, "web_service_port": web_port}
    )
    if read_only:
        overrides["read_only_broker"] = True
    try:
        config = BrokerConfig.load(config_path, overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    run(serve(config))


async def serve(config: BrokerConfig) -> None:
    from magnetar.broker.service import BrokerService

    service = BrokerService(config)
    try:
        await service.start()
    except Exception as exc:
        log.error("broker failed to start: %s", exc)
        raise SystemExit(1) from exc
    stop = asyncio.Event()
    bound_s = config.broker_shutdown_timeout_ms / 1000
    # the last resort covers what the bounded stop cannot see, a stuck event loop included
    stop_on_signals(stop.set, bound_s + _EXIT_MARGIN_S, "broker")
    address = f"{config.advertised_address}:{service.port}"
    urls = f"service_url={service.service_url} web_service_url={service.web_service_url}"
    if service.service_url_tls or service.web_service_url_tls:  # announced only when there
        urls += (
            f" service_url_tls={service.service_url_tls} web_service_url_tls={service.web_service_url_tls}"
        )
    heap.settle()
    click.echo(f"{READY_PREFIX} {address} {urls}")
    sys.stdout.flush()
    await stop.wait()
    await _stop_within(service, bound_s)


async def _stop_within(service: BrokerService, bound_s: float) -> None:
    """The graceful stop, given up after ``bound_s`` less the reserve: with the metadata store
    gone its steps wait on requests it never answers. The stores are then closed, which fails
    those requests, so what is left of the stop unwinds instead of holding the process."""
    graceful = asyncio.ensure_future(service.stop())
    done, _ = await asyncio.wait({graceful}, timeout=max(bound_s - _CLOSE_RESERVE_S, 1.0))
    if done:
        graceful.result()
        return
    log.warning(
        "broker shutdown did not finish within %.1fs (metadata store unreachable?): "
        "giving it up and closing the metadata-store sessions",
        bound_s - _CLOSE_RESERVE_S,
    )
    graceful.cancel()
    stores: list[MetadataStore] = [s for s in (service.configuration_store, service.store) if s is not None]
    closing = [asyncio.ensure_future(store.close()) for store in dict.fromkeys(stores)]
    _, late = await asyncio.wait(closing, timeout=_CLOSE_RESERVE_S)
    for each in late:
        each.cancel()
