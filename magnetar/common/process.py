"""What every server command shares: ``--set key=value`` parsing, logging, and the event loop."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import click
import yaml


def parse_sets(values: tuple[str, ...]) -> dict[str, Any]:
    """``--set key=value`` flags as config overrides; values are YAML ("true", "3", "[a, b]")."""
    parsed: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint="--set")
        parsed[key.strip().replace("-", "_")] = yaml.safe_load(raw)
    return parsed


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def run(main: Coroutine[Any, Any, None]) -> None:
    """Run a server's main coroutine on uvloop where available."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


def exit_after(seconds: float, what: str) -> None:
    """The last resort behind a bounded shutdown: end the process with status 1 if it is still
    there ``seconds`` from now (a step the bound missed, a thread that holds the interpreter).
    A daemon timer, so a process that exits in time is not held by it."""

    def overrun() -> None:
        logging.getLogger("magnetar").error(
            "%s did not exit within %.0fs of being asked to stop: exiting now", what, seconds
        )
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(seconds, overrun)
    timer.daemon = True
    timer.start()


def stop_on_signals(stop: Callable[[], None], bound_s: float, what: str) -> None:
    """At SIGTERM or SIGINT, call ``stop`` on the running loop, and arm ``exit_after(bound_s)``
    in the signal handler itself rather than in ``stop``: a loop that is stuck in a call that
    never returns never runs ``stop``, yet the process still ends within the bound.

    Python runs the handler in the main thread as soon as a blocking call there is interrupted
    (and retried, PEP 475), which is where a stuck loop stands."""
    loop = asyncio.get_running_loop()
    armed = False

    def handler(_signum: int, _frame: object) -> None:
        nonlocal armed
        if not armed:
            armed = True
            exit_after(bound_s, what)
        loop.call_soon_threadsafe(stop)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)
