"""What the ``magnetar admin`` command groups share: the admin client failing as a command
does, and how answers are shown."""

from __future__ import annotations

import re
from typing import Any

import click
from rich.console import Console

from magnetar.admin import client as admin_client

console = Console()

_DURATION = re.compile(r"^(\d+)([smhdw]?)$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def topic_path(topic: str) -> str:
    """``domain/tenant/ns/topic`` of a ``persistent://`` or ``non-persistent://`` name, as the
    admin paths take it."""
    domain, _, rest = topic.partition("://")
    if domain not in ("persistent", "non-persistent") or not rest:
        raise click.BadParameter(
            f"expected persistent://tenant/namespace/topic or non-persistent://…, got {topic!r}"
        )
    return f"{domain}/{rest}"


def duration_seconds(value: str) -> int:
    """pulsar-admin's durations: 30, 30s, 10m, 2h, 3d, 1w."""
    match = _DURATION.match(value.strip())
    if match is None:
        raise click.BadParameter(f"expected a duration such as 30s, 10m, 2h or 3d, not {value!r}")
    return int(match.group(1)) * _SECONDS[match.group(2)]


class AdminClient(admin_client.AdminClient):
    """The shared admin client, failing as a command does (a ClickException saying why)."""

    def call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            return super().call(method, path, body)
        except admin_client.AdminError as exc:
            raise click.ClickException(str(exc)) from None


def show(value: Any) -> None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        for item in value:
            console.print(item, markup=False)
    elif isinstance(value, admin_client.StoredMessage):
        show_message(value)
    elif value is not None:
        console.print_json(data=value)


_SHOWN_HEADERS = (
    ("x-pulsar-publish-time", "Publish time"),
    ("x-pulsar-property", "Properties"),
    ("x-pulsar-num-batch-message", "Batch size"),
    ("x-pulsar-partition-key", "Key"),
)


def show_message(message: admin_client.StoredMessage) -> None:
    """As pulsar-admin prints a peeked message: its id and metadata, then the payload."""
    headers = {k.lower(): v for k, v in message.headers.items()}
    console.print(f"Message ID: {headers.get('x-pulsar-message-id', '?')}", markup=False)
    for key, label in _SHOWN_HEADERS:
        if key in headers:
            console.print(f"{label}: {headers[key]}", markup=False)
    try:
        console.print(message.payload.decode(), markup=False)
    except UnicodeDecodeError:
        console.print(message.payload.hex(" ", 16), markup=False)
