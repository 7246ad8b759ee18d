"""``magnetar admin schemas``: the schema registry in ``pulsar-admin schemas``' shapes."""

from __future__ import annotations

import json
from pathlib import Path

import click

from magnetar.admin.cli_common import AdminClient, show, topic_path


def _path(topic: str) -> str:
    return f"/admin/v2/schemas/{topic_path(topic).split('/', 1)[1]}"


def _payload(filename: Path) -> object:
    try:
        return json.loads(filename.read_text())
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"{filename}: {exc}", param_hint="--filename") from None


@click.group(
    epilog="""\b
Examples:
  magnetar admin schemas get persistent://public/default/users
  magnetar admin schemas get persistent://public/default/users --version 0
  magnetar admin schemas upload persistent://public/default/users -f user-schema.json
  magnetar admin schemas compatibility persistent://public/default/users -f user-schema.json
  magnetar admin schemas delete persistent://public/default/users
A schema file is Pulsar's: {"type": "AVRO", "schema": "<Avro schema as text>", "properties": {}}"""
)
def schemas() -> None:
    """Topic schemas (the schema registry)."""


@schemas.command("get")
@click.argument("topic")
@click.option("--version", "-v", type=int, help="That version (default: the latest).")
@click.option("--all-versions", "-a", is_flag=True, help="Every version since the last deletion.")
@click.pass_obj
def schemas_get(client: AdminClient, topic: str, version: int | None, all_versions: bool) -> None:
    if all_versions:
        show(client.call("GET", f"{_path(topic)}/schemas"))
    elif version is not None:
        show(client.call("GET", f"{_path(topic)}/schema/{version}"))
    else:
        show(client.call("GET", f"{_path(topic)}/schema"))


@schemas.command("upload")
@click.argument("topic")
@click.option("--filename", "-f", type=Path, required=True, help="The schema file (JSON, Pulsar's shape).")
@click.pass_obj
def schemas_upload(client: AdminClient, topic: str, filename: Path) -> None:
    show(client.call("POST", f"{_path(topic)}/schema", _payload(filename)))


@schemas.command("compatibility")
@click.argument("topic")
@click.option("--filename", "-f", type=Path, required=True, help="The schema file (JSON, Pulsar's shape).")
@click.pass_obj
def schemas_compatibility(client: AdminClient, topic: str, filename: Path) -> None:
    show(client.call("POST", f"{_path(topic)}/compatibility", _payload(filename)))


@schemas.command("delete")
@click.argument("topic")
@click.pass_obj
def schemas_delete(client: AdminClient, topic: str) -> None:
    show(client.call("DELETE", f"{_path(topic)}/schema"))
