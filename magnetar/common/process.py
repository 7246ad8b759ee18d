"""What every server command shares: ``--set key=value`` parsing, logging, and the event loop."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Coroutine
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
