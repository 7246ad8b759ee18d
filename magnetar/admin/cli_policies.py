"""``magnetar admin namespaces|topics set-/get-/remove-<policy>``: topic policies in
``pulsar-admin``'s command shapes (sizes as 10M or 2G, times as 30s, 10m, 3d; -1: no limit)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, get_args

import click

from magnetar.admin.cli_common import AdminClient, duration_seconds, show, topic_path
from magnetar.admin.schema_strategies import SchemaStrategy

_SIZE = re.compile(r"^(-1|\d+)([KMGT]?)$", re.I)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _bytes(value: str) -> int:
    match = _SIZE.match(value.strip())
    if match is None:
        raise click.BadParameter(f"expected a size such as 500M or 2G (-1: no limit), not {value!r}")
    number = int(match.group(1))
    return number if number < 0 else number * _UNITS[match.group(2).upper()]


def _minutes(value: str) -> int:
    return -1 if value.strip() == "-1" else max(0, duration_seconds(value) // 60)


def _retention(size: str, time: str) -> dict[str, int]:
    mb = _bytes(size)
    return {"retentionTimeInMinutes": _minutes(time), "retentionSizeInMB": mb if mb < 0 else mb >> 20}


#: name, (namespace path, topic path), GET path (None: the same), options, body from the options
_Body = Callable[..., Any]
_POLICIES: list[tuple[str, tuple[str, str], str | None, list[click.Option], _Body]] = [
    ("retention", ("retention", "retention"), None,
     [click.Option(["--size", "-s"], required=True, help="Consumed data kept: 500M, 2G (-1: no limit)."),
      click.Option(["--time", "-t"], required=True, help="How long it is kept: 3d, 12h (-1: ever).")],
     _retention),
    ("message-ttl", ("messageTTL", "messageTTL"), None,
     [click.Option(["--messageTTL", "--ttl", "-t", "ttl"], required=True,
                   help="Unacknowledged messages older than this expire: 3600, 1h, 2d (0: never).")],
     lambda ttl: duration_seconds(ttl)),
    ("backlog-quota", ("backlogQuota", "backlogQuota"), "backlogQuotaMap",
     [click.Option(["--limit", "-l"], required=True, help="Backlog size: 10M, 2G."),
      click.Option(["--policy", "-p"], required=True, type=click.Choice(
          ["producer_request_hold", "producer_exception", "consumer_backlog_eviction"]))],
     lambda limit, policy: {"limitSize": _bytes(limit), "limitTime": -1, "policy": policy}),
    ("max-producers", ("maxProducersPerTopic", "maxProducers"), None,
     [click.Option(["--max-producers", "-p"], type=int, required=True, help="0: no limit.")],
     lambda max_producers: max_producers),
    ("max-consumers", ("maxConsumersPerTopic", "maxConsumers"), None,
     [click.Option(["--max-consumers", "-c"], type=int, required=True, help="0: no limit.")],
     lambda max_consumers: max_consumers),
    ("publish-rate", ("publishRate", "publishRate"), None,
     [click.Option(["--msg-publish-rate", "-m"], type=int, default=-1, show_default=True),
      click.Option(["--byte-publish-rate", "-b"], type=int, default=-1, show_default=True)],
     lambda msg_publish_rate, byte_publish_rate: {
         "publishThrottlingRateInMsg": msg_publish_rate, "publishThrottlingRateInByte": byte_publish_rate}),
    ("dispatch-rate", ("dispatchRate", "dispatchRate"), None,
     [click.Option(["--msg-dispatch-rate", "-md"], type=int, default=-1, show_default=True),
      click.Option(["--byte-dispatch-rate", "-bd"], type=int, default=-1, show_default=True),
      click.Option(["--dispatch-rate-period", "-dt"], type=int, default=1, show_default=True)],
     lambda msg_dispatch_rate, byte_dispatch_rate, dispatch_rate_period: {
         "dispatchThrottlingRateInMsg": msg_dispatch_rate, "dispatchThrottlingRateInByte": byte_dispatch_rate,
         "ratePeriodInSecond": dispatch_rate_period}),
    ("delayed-delivery", ("delayedDelivery", "delayedDelivery"), None,
     [click.Option(["--enable/--disable", "-e/-d"], required=True, help="Hold messages until their time."),
      click.Option(["--time", "-t"], default="1s", show_default=True, help="Tick time (1s, 2s).")],
     lambda enable, time: {"active": enable, "tickTime": duration_seconds(time) * 1000}),
    ("schema-compatibility-strategy", ("schemaCompatibilityStrategy", "schemaCompatibilityStrategy"), None,
     [click.Option(["--compatibility", "-c"], required=True, type=click.Choice(get_args(SchemaStrategy)),
                   help="Which schemas may follow the topic's.")],
     lambda compatibility: compatibility),
    ("is-allow-auto-update-schema", ("isAllowAutoUpdateSchema", "isAllowAutoUpdateSchema"), None,
     [click.Option(["--enable/--disable", "-e/-d"], required=True,
                   help="Producers may register new schemas (else only schemas upload).")],
     lambda enable: enable),
    ("schema-validation-enforce", ("schemaValidationEnforced", "schemaValidationEnforced"), None,
     [click.Option(["--enable/--disable", "-e/-d"], required=True,
                   help="Refuse producers without a schema on topics that have one.")],
     lambda enable: enable),
    ("compaction-threshold", ("compactionThreshold", "compactionThreshold"), None,
     [click.Option(["--threshold", "-t"], required=True,
                   help="Compact once this much follows the last compaction: 100M, 1G (0: never).")],
     lambda threshold: _bytes(threshold)),
]  # fmt: skip


def _client() -> AdminClient:
    client = click.get_current_context().find_object(AdminClient)
    if client is None:
        raise click.UsageError("run as: magnetar admin [--admin-url URL] …")
    return client


def _base(level: str, target: str) -> str:
    return f"/admin/v2/namespaces/{target}" if level == "namespaces" else f"/admin/v2/{topic_path(target)}"


def _commands(level: str) -> list[click.Command]:
    argument = "NAMESPACE" if level == "namespaces" else "TOPIC"
    found: list[click.Command] = []
    for name, paths, get_path, options, body in _POLICIES:
        path = paths[0] if level == "namespaces" else paths[1]
        cli_name = f"{name}s" if name == "backlog-quota" else name

        def setter(target: str, _path: str = path, _body: _Body = body, **values: Any) -> None:
            _client().call("POST", f"{_base(level, target)}/{_path}", _body(**values))

        def getter(target: str, applied: bool, _path: str = get_path or path) -> None:
            query = "?applied=true" if applied else ""
            show(_client().call("GET", f"{_base(level, target)}/{_path}{query}"))

        def remover(target: str, _path: str = path) -> None:
            _client().call("DELETE", f"{_base(level, target)}/{_path}")

        target = click.Argument(["target"], metavar=argument)
        applied = click.Option(["--applied", "-a"], is_flag=True, help="What applies (with the defaults).")
        found += [
            click.Command(f"set-{name}", callback=setter, params=[target, *options], help=f"Set the {name}."),
            click.Command(f"get-{cli_name}", callback=getter, params=[target, applied], help=f"The {name}."),
            click.Command(f"remove-{name}", callback=remover, params=[target], help=f"Unset the {name}."),
        ]
    return found


def install(namespaces: click.Group, topics: click.Group) -> None:
    for command in _commands("namespaces"):
        namespaces.add_command(command)
    for command in _commands("topics"):
        topics.add_command(command)
