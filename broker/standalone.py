"""``magnetar standalone``: metadata, one bookie and one broker in one process, like
``pulsar standalone``. The metadata store is a SQLite file in the data directory, so a restart
keeps topics, subscriptions and acknowledgements."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from magnetar.common import heap
from magnetar.common.config import ConfigError
from magnetar.common.process import parse_sets, run, setup_logging

if TYPE_CHECKING:
    from magnetar.broker.config import BrokerConfig

log = logging.getLogger("magnetar.standalone")


@click.command(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar standalone
  magnetar standalone --data-dir /tmp/magnetar --port 6651 --web-port 8081
  magnetar standalone --port 0 --web-port 0      # free ports, printed on the ready line
  magnetar standalone --set broker_deduplication_enabled=true
  magnetar standalone --secure       # tokens and TLS on: key, super-user token and CA made in the data dir
  magnetar standalone --set broker_service_port_tls=6651 --set web_service_port_tls=8443 \
      --set tls_certificate_file_path=broker.cert.pem --set tls_key_file_path=broker.key.pem
Then, with the official client:
  python -c "import pulsar; c = pulsar.Client('pulsar://127.0.0.1:6650'); ..."
Ctrl-C stops it cleanly.""",
)
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("data/standalone"),
              show_default=True, help="Where the metadata, journal and ledgers live.")  # fmt: skip
@click.option("--port", type=int, default=6650, show_default=True, help="Pulsar protocol port.")
@click.option("--web-port", type=int, default=8080, show_default=True, help="HTTP port (/metrics).")
@click.option("--bookie-port", type=int, default=0, show_default=True, help="The bookie's gRPC port.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="A broker setting (Pulsar's broker.conf name in snake_case); repeatable.")  # fmt: skip
@click.option(
    "--secure",
    is_flag=True,
    help="Token authentication, authorization and TLS (pulsar+ssl:// on 6651, https:// on 8443), "
    "with a key, a super-user token and a CA made for you in the data directory.",
)
@click.option("--log-level", default="WARNING", show_default=True)
def standalone(
    data_dir: Path,
    port: int,
    web_port: int,
    bookie_port: int,
    sets: tuple[str, ...],
    secure: bool,
    log_level: str,
) -> None:
    """Run a whole Magnetar cluster in one process (metadata, bookie, broker)."""
    from magnetar.broker.config import BrokerConfig

    setup_logging(log_level)
    data_dir = data_dir.resolve()
    # One bookie, so one copy of each entry (as in Pulsar standalone); --set may override the rest.
    secured: dict[str, object] = {}
    token = None
    if secure:
        from magnetar.broker.standalone_security import secure_settings

        secured, token = secure_settings(data_dir)
    settings = {
        **secured,
        "metadata_store_url": f"sqlite://{data_dir / 'metadata.db'}",
        "managed_ledger_default_ensemble_size": 1,
        "managed_ledger_default_write_quorum": 1,
        "managed_ledger_default_ack_quorum": 1,
        **parse_sets(sets),
        "broker_service_port": port,
        "web_service_port": web_port,
    }
    try:
        config = BrokerConfig.load(None, settings)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    data_dir.mkdir(parents=True, exist_ok=True)
    run(_serve(data_dir, config, bookie_port, token))


async def _serve(data_dir: Path, config: BrokerConfig, bookie_port: int, token: Path | None) -> None:
    from magnetar.bookie.config import BookieConfig
    from magnetar.bookie.server import start_bookie
    from magnetar.broker.service import BrokerService

    started = time.monotonic()
    metadata = config.metadata_store_url
    bookie = await start_bookie(
        BookieConfig(
            bookie_port=bookie_port,
            journal_directory=str(data_dir / "bookie" / "journal"),
            ledger_directories=[str(data_dir / "bookie" / "ledgers")],
            metadata_service_uri=metadata,
            bookie_id="standalone-bookie",
            enable_statistics=False,
            auto_recovery_daemon_enabled=False,
        )
    )
    broker = BrokerService(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tls = ""
    if broker.service_url_tls or broker.web_service_url_tls:
        tls = (
            f"service_url_tls={broker.service_url_tls or '-'} "
            f"web_service_url_tls={broker.web_service_url_tls or '-'} "
        )
    heap.settle()
    click.echo(
        f"standalone ready service_url={broker.service_url} web_service_url={broker.web_service_url} "
        f"{tls}in {time.monotonic() - started:.2f}s"
    )
    if token is not None:
        from magnetar.broker.standalone_security import how_to_use

        click.echo(how_to_use(token, broker))
    sys.stdout.flush()
    await stop.wait()
    await broker.stop()
    await bookie.stop()
