"""``magnetar admin namespaces|topics grant-permission / revoke-permission / permissions``, in
pulsar-admin's shape."""

from __future__ import annotations

import click

from magnetar.admin.cli_common import AdminClient, show, topic_path


def _path(kind: str, target: str) -> str:
    if kind == "namespaces":
        return f"/admin/v2/namespaces/{target}/permissions"
    return f"/admin/v2/{topic_path(target)}/permissions"


def _commands(kind: str) -> list[click.Command]:
    argument = "NAMESPACE" if kind == "namespaces" else "TOPIC"
    target = click.Argument(["target"], metavar=argument)
    role = click.Option(["--role", "-r"], required=True, help="The role (a token's subject).")
    actions = click.Option(
        ["--actions", "-a"],
        required=True,
        help="Comma-separated: produce, consume, functions, sources, sinks, packages.",
    )

    @click.pass_obj
    def grant(client: AdminClient, target: str, role: str, actions: str) -> None:
        granted = [a.strip() for a in actions.split(",") if a.strip()]
        client.call("POST", f"{_path(kind, target)}/{role}", granted)

    @click.pass_obj
    def revoke(client: AdminClient, target: str, role: str) -> None:
        client.call("DELETE", f"{_path(kind, target)}/{role}")

    @click.pass_obj
    def permissions(client: AdminClient, target: str) -> None:
        show(client.call("GET", _path(kind, target)))

    noun = argument.lower()
    return [
        click.Command("grant-permission", callback=grant, params=[target, role, actions],
                      help=f"Let a role produce/consume on the {noun}."),
        click.Command("revoke-permission", callback=revoke, params=[target, role],
                      help=f"Take a role's grant on the {noun} back."),
        click.Command("permissions", callback=permissions, params=[target],
                      help=f"The roles' grants on the {noun}."),
    ]  # fmt: skip


def install(namespaces: click.Group, topics: click.Group) -> None:
    for command in _commands("namespaces"):
        namespaces.add_command(command)
    for command in _commands("topics"):
        topics.add_command(command)
