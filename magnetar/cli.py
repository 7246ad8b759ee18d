"""The ``magnetar`` command. Each subcommand lives with its component and is imported only when
invoked, so ``magnetar --help`` stays fast and a component's dependencies load only when needed."""

from __future__ import annotations

import importlib

import click

from magnetar import __version__

#: subcommand name -> "module:click-command"; components add their entry here
COMMANDS: dict[str, str] = {
    "bookie": "magnetar.bookie.cli:bookie",
    "admin": "magnetar.admin.cli:admin",
    "broker": "magnetar.broker.cli:broker",
    "standalone": "magnetar.broker.standalone:standalone",
    "shell": "magnetar.bookie.shell:shell",
    "local": "magnetar.local.cli:local",
    "chaos": "magnetar.chaos.cli:chaos",
    "workload": "magnetar.chaos.workload.cli:workload",
    "postmortem": "magnetar.spark.cli:postmortem",
    "operator": "magnetar.operator.cli:operator",
    "tokens": "magnetar.common.authentication.cli:tokens_command",
    "kube": "magnetar.kube.cli:kube",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar bookie --config bookie.yaml
  magnetar shell listbookies --metadata zk://127.0.0.1:2181/magnetar
  magnetar postmortem runs/2026-11-22T10-00-00""",
)
@click.version_option(__version__, prog_name="magnetar")
def main() -> None:
    """Magnetar: a Pulsar-compatible streaming system, its chaos lab and post-mortems."""
