"""MkDocs hook: the CLI and settings reference pages, generated from the code at build time.

``docs/reference/cli.md`` and ``docs/reference/settings.md`` are stubs holding a marker; this hook
replaces ``<!-- magnetar:cli -->`` with the ``--help`` text of every ``magnetar`` command and
subcommand (walking the click tree, lazily imported subcommands included), and
``<!-- magnetar:settings -->`` with a table per typed configuration model (pydantic). Nothing
generated is committed: the pages always say what the installed code says.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import textwrap
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import annotated_types
import click
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

CLI_MARKER = "<!-- magnetar:cli -->"
SETTINGS_MARKER = "<!-- magnetar:settings -->"

#: help text is wrapped at this width, whatever terminal runs the build
HELP_WIDTH = 100

#: the settings models, in the order the page shows them: (import path, what sets them)
SETTINGS_MODELS: tuple[tuple[str, str], ...] = (
    (
        "magnetar.broker.config:BrokerConfig",
        "`magnetar broker`: a YAML file (`--config`), environment variables "
        "`MAGNETAR_BROKER_<SETTING>`, then `--set setting=value` and the named flags. "
        "`magnetar standalone` takes the same settings without a file (environment and `--set`).",
    ),
    (
        "magnetar.bookie.config:BookieConfig",
        "`magnetar bookie`: a YAML file (`--config`), environment variables "
        "`MAGNETAR_BOOKIE_<SETTING>`, then `--set setting=value` and the named flags.",
    ),
    (
        "magnetar.broker.managed_ledger.config:ManagedLedgerConfig",
        "Not read from a file: the broker builds it from its `managed_ledger_*` and "
        "`default_retention_*` settings (`BrokerConfig.managed_ledger()`).",
    ),
    (
        "magnetar.bookie.client.client:LedgerClientConfig",
        "Not read from a file: the broker builds it from its `managed_ledger_default_*` quorums "
        "and `bookkeeper_*` settings (`BrokerConfig.ledger_client()`); auto-recovery and "
        "`magnetar shell` use its defaults with their own TLS files.",
    ),
)

#: fields of ComponentConfig that are class constants rather than settings
NOT_SETTINGS = frozenset({"env_prefix"})


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Fill the reference pages' markers; every other page passes through unchanged."""
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, settings_reference())
    return markdown


# -- CLI ---------------------------------------------------------------------------------------


def cli_reference() -> str:
    """One section per command and subcommand of ``magnetar``, each its ``--help`` text."""
    from magnetar.cli import main

    sections = []
    for ctx in _walk(main, "magnetar", None):
        depth = ctx.command_path.count(" ")
        level = "#" * min(max(depth, 1) + 1, 6)
        help_text = _home_as_tilde(ctx.command.get_help(ctx))
        sections.append(f"{level} {ctx.command_path}\n\n```text\n{help_text}\n```\n")
    return "\n".join(sections)


def _walk(command: click.Command, name: str, parent: click.Context | None) -> Iterator[click.Context]:
    """The command's context, then its subcommands' (depth first, in the group's order)."""
    ctx = _context(command, name, parent)
    yield ctx
    if isinstance(command, click.Group):
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, sub_name, ctx)


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    """A context as invoking the command would make it (its context_settings, such as -h), at a
    fixed width."""
    settings: dict[str, Any] = {"terminal_width": HELP_WIDTH, "max_content_width": HELP_WIDTH}
    settings.update(command.context_settings)
    return click.Context(command, info_name=name, parent=parent, **settings)


def _home_as_tilde(text: str) -> str:
    """Defaults under the builder's home directory, as ``~`` (the same page on every machine)."""
    return text.replace(str(Path.home()), "~")


# -- settings ----------------------------------------------------------------------------------


def settings_reference() -> str:
    """A section per settings model: where it comes from, then a table of its fields."""
    sections = []
    for target, source in SETTINGS_MODELS:
        model = _import(target)
        own_doc = model.__dict__.get("__doc__")  # not BaseModel's, which every model inherits
        doc = inspect.cleandoc(own_doc) if isinstance(own_doc, str) else ""
        lines = [f"## {model.__name__}", "", f"`{model.__module__}.{model.__name__}`. {source}", ""]
        if doc:
            lines += [doc, ""]
        lines += ["| setting | type | default | description |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            if name in NOT_SETTINGS:
                continue
            cells = (
                f"`{name}`",
                _type_cell(field),
                _default_cell(field),
                _description(model, name, field),
            )
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        sections.append("\n".join(lines) + "\n")
    return "\n".join(sections)


def _import(target: str) -> type[BaseModel]:
    module_name, attr = target.split(":")
    model = getattr(importlib.import_module(module_name), attr)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"{target} is not a pydantic model")
    return model


def _type_cell(field: FieldInfo) -> str:
    """The annotation without module paths, then its bounds (``≥ 0``, ``≤ 65535``, ...)."""
    annotation = field.annotation
    shown = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    # module paths off (typing.Literal -> Literal), never inside a Literal's quoted values
    shown = re.sub(r"(?<![\w.'\"])(?:[a-z_]\w*\.)+(?=[A-Za-z_])", "", shown)
    bounds = [_bound(m) for m in field.metadata]
    return "`" + shown + "`" + "".join(f", {b}" for b in bounds if b)


def _bound(constraint: object) -> str:
    if isinstance(constraint, annotated_types.Ge):
        return f"≥ {_value(constraint.ge)}"
    if isinstance(constraint, annotated_types.Gt):
        return f"> {_value(constraint.gt)}"
    if isinstance(constraint, annotated_types.Le):
        return f"≤ {_value(constraint.le)}"
    if isinstance(constraint, annotated_types.Lt):
        return f"< {_value(constraint.lt)}"
    if isinstance(constraint, annotated_types.MinLen):
        return f"at least {constraint.min_length} item(s)"
    if isinstance(constraint, annotated_types.MaxLen):
        return f"at most {constraint.max_length} item(s)"
    return ""


def _default_cell(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    return f"`{_value(value)}`"


def _value(value: object) -> str:
    """As a YAML file would hold it (JSON is YAML), else Python's repr."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except TypeError:
        return repr(value)


def _description(model: type[BaseModel], name: str, field: FieldInfo) -> str:
    """``Field(description=...)`` if given, else the ``#:`` comment above the field in the source."""
    if field.description:
        return field.description
    for cls in model.__mro__:
        if name in inspect.get_annotations(cls):
            return _doc_comments(cls).get(name, "")
    return ""


@cache
def _doc_comments(cls: type) -> dict[str, str]:
    """Each annotated attribute of the class's body -> the ``#:`` comment lines just above it."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    found: dict[str, str] = {}
    (class_def,) = ast.parse(source).body
    assert isinstance(class_def, ast.ClassDef)
    for node in class_def.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        comment: list[str] = []
        index = node.lineno - 2  # the line above, 0-based
        while index >= 0 and lines[index].strip().startswith("#:"):
            comment.insert(0, lines[index].strip()[2:].strip())
            index -= 1
        if comment:
            found[node.target.id] = " ".join(comment)
    return found


def _cell(text: str) -> str:
    """Text that stays in its table cell: pipes escaped, except inside code spans (where the
    table parser leaves them alone and an escape would show)."""
    out: list[str] = []
    position = 0
    for span in re.finditer(r"(`+).+?\1", text):
        out += [text[position : span.start()].replace("|", "\\|"), span.group(0)]
        position = span.end()
    out.append(text[position:].replace("|", "\\|"))
    return "".join(out).replace("\n", " ")
