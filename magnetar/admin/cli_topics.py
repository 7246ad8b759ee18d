"""``magnetar admin topics``: topics, partitioned topics, subscriptions and messages, in
``pulsar-admin topics``' command shapes."""

from __future__ import annotations

import time

import click

from magnetar.admin.cli_common import AdminClient, duration_seconds, show, topic_path


def _message_id(value: str) -> dict[str, int]:
    """``ledgerId:entryId`` (or ``earliest``/``latest``) as the admin REST's MessageId."""
    if value in ("earliest", "latest"):
        first = -1 if value == "earliest" else 2**63 - 1
        return {"ledgerId": first, "entryId": first, "partitionIndex": -1}
    parts = value.split(":")
    if len(parts) < 2 or not all(p.lstrip("-").isdigit() for p in parts[:2]):
        raise click.BadParameter(f"expected ledgerId:entryId, earliest or latest, not {value!r}")
    return {"ledgerId": int(parts[0]), "entryId": int(parts[1]), "partitionIndex": -1}


@click.group(
    epilog="""\b
Examples:
  magnetar admin topics create-partitioned-topic persistent://public/default/orders -p 8
  magnetar admin topics create-subscription persistent://public/default/orders -s audit -m earliest
  magnetar admin topics peek-messages persistent://public/default/orders -s audit -n 3
  magnetar admin topics reset-cursor persistent://public/default/orders -s audit -t 10m
  magnetar admin topics delete persistent://public/default/orders --force""",
)
def topics() -> None:
    """Topics, partitioned topics, subscriptions and messages."""


@topics.command("list")
@click.argument("namespace")
@click.pass_obj
def topics_list(client: AdminClient, namespace: str) -> None:
    """Every topic of NAMESPACE, partitions included: persistent ones, then the non-persistent
    ones loaded on the broker asked."""
    persistent = client.call("GET", f"/admin/v2/persistent/{namespace}")
    show([*persistent, *client.call("GET", f"/admin/v2/non-persistent/{namespace}")])


@topics.command("list-partitioned-topics")
@click.argument("namespace")
@click.pass_obj
def topics_list_partitioned(client: AdminClient, namespace: str) -> None:
    """The partitioned topics of NAMESPACE."""
    show(client.call("GET", f"/admin/v2/persistent/{namespace}/partitioned"))


@topics.command("create")
@click.argument("topic")
@click.pass_obj
def topics_create(client: AdminClient, topic: str) -> None:
    """A non-partitioned topic."""
    client.call("PUT", f"/admin/v2/{topic_path(topic)}")


@topics.command("create-partitioned-topic")
@click.argument("topic")
@click.option("--partitions", "-p", type=int, required=True, help="Number of partitions.")
@click.pass_obj
def topics_create_partitioned(client: AdminClient, topic: str, partitions: int) -> None:
    """A partitioned topic of N partitions."""
    client.call("PUT", f"/admin/v2/{topic_path(topic)}/partitions", partitions)


@topics.command("update-partitioned-topic")
@click.argument("topic")
@click.option("--partitions", "-p", type=int, required=True, help="The new, larger number of partitions.")
@click.pass_obj
def topics_update_partitioned(client: AdminClient, topic: str, partitions: int) -> None:
    """More partitions (never fewer)."""
    client.call("POST", f"/admin/v2/{topic_path(topic)}/partitions", partitions)


@topics.command("get-partitioned-topic-metadata")
@click.argument("topic")
@click.pass_obj
def topics_partitioned_metadata(client: AdminClient, topic: str) -> None:
    """The number of partitions (0 for a non-partitioned topic)."""
    show(client.call("GET", f"/admin/v2/{topic_path(topic)}/partitions"))


@topics.command("delete")
@click.argument("topic")
@click.option("--force", "-f", is_flag=True, help="Disconnect its producers and consumers first.")
@click.pass_obj
def topics_delete(client: AdminClient, topic: str, force: bool) -> None:
    """A non-partitioned topic and its data, for good."""
    client.call("DELETE", f"/admin/v2/{topic_path(topic)}?force={str(force).lower()}")


@topics.command("delete-partitioned-topic")
@click.argument("topic")
@click.option("--force", "-f", is_flag=True, help="Disconnect its producers and consumers first.")
@click.pass_obj
def topics_delete_partitioned(client: AdminClient, topic: str, force: bool) -> None:
    """A partitioned topic and every partition's data, for good."""
    client.call("DELETE", f"/admin/v2/{topic_path(topic)}/partitions?force={str(force).lower()}")


@topics.command("terminate")
@click.argument("topic")
@click.pass_obj
def topics_terminate(client: AdminClient, topic: str) -> None:
    """No more messages may be published; prints the last message's id."""
    show(client.call("POST", f"/admin/v2/{topic_path(topic)}/terminate"))


@topics.command("last-message-id")
@click.argument("topic")
@click.pass_obj
def topics_last_message_id(client: AdminClient, topic: str) -> None:
    """The id of the last message a consumer can be given."""
    show(client.call("GET", f"/admin/v2/{topic_path(topic)}/lastMessageId"))


@topics.command("stats")
@click.argument("topic")
@click.pass_obj
def topics_stats(client: AdminClient, topic: str) -> None:
    """Rates, backlogs, publishers and subscriptions."""
    show(client.call("GET", f"/admin/v2/{topic_path(topic)}/stats"))


@topics.command("stats-internal")
@click.argument("topic")
@click.pass_obj
def topics_stats_internal(client: AdminClient, topic: str) -> None:
    """The managed ledger: ledgers, cursors and positions."""
    show(client.call("GET", f"/admin/v2/{topic_path(topic)}/internalStats"))


@topics.command("unload")
@click.argument("topic")
@click.pass_obj
def topics_unload(client: AdminClient, topic: str) -> None:
    """Close the topic here; its next lookup places it again."""
    client.call("PUT", f"/admin/v2/{topic_path(topic)}/unload")


@topics.command("lookup")
@click.argument("topic")
@click.pass_obj
def topics_lookup(client: AdminClient, topic: str) -> None:
    """The broker that serves the topic."""
    show(client.call("GET", f"/lookup/v2/topic/{topic_path(topic)}"))


@topics.command("bundle-range")
@click.argument("topic")
@click.pass_obj
def topics_bundle_range(client: AdminClient, topic: str) -> None:
    """The bundle of its namespace the topic falls in (for namespaces unload --bundle)."""
    show(client.call("GET", f"/admin/v2/{topic_path(topic)}/bundle"))


@topics.command("examine-message")
@click.argument("topic")
@click.option("--initialPosition", "--initial-position", "-i", "initial",
              type=click.Choice(["earliest", "latest"]), default="latest", show_default=True)  # fmt: skip
@click.option("--messagePosition", "--message-position", "-m", "position", type=int, default=1,
              show_default=True, help="1 is the first (earliest) or the last (latest) message.")  # fmt: skip
@click.pass_obj
def topics_examine(client: AdminClient, topic: str, initial: str, position: int) -> None:
    """One message, counted from the first or from the last."""
    query = f"initialPosition={initial}&messagePosition={position}"
    show(client.call("GET", f"/admin/v2/{topic_path(topic)}/examinemessage?{query}"))


@topics.command("get-message-by-id")
@click.argument("topic")
@click.option("--ledger-id", "-l", type=int, required=True)
@click.option("--entry-id", "-e", type=int, required=True)
@click.pass_obj
def topics_get_message(client: AdminClient, topic: str, ledger_id: int, entry_id: int) -> None:
    """One message by its id."""
    show(client.call("GET", f"/admin/v2/{topic_path(topic)}/ledger/{ledger_id}/entry/{entry_id}"))


# -- subscriptions ---------------------------------------------------------------------------------
@topics.command("subscriptions")
@click.argument("topic")
@click.pass_obj
def topics_subscriptions(client: AdminClient, topic: str) -> None:
    """The topic's subscriptions."""
    show(client.call("GET", f"/admin/v2/{topic_path(topic)}/subscriptions"))


def _subscription(topic: str, subscription: str) -> str:
    return f"/admin/v2/{topic_path(topic)}/subscription/{subscription}"


@topics.command("create-subscription")
@click.argument("topic")
@click.option("--subscription", "-s", required=True)
@click.option("--messageId", "--message-id", "-m", "message_id", default="latest", show_default=True,
              help="Where it starts: ledgerId:entryId, earliest or latest.")  # fmt: skip
@click.pass_obj
def topics_create_subscription(client: AdminClient, topic: str, subscription: str, message_id: str) -> None:
    """A durable subscription starting at a message."""
    client.call("PUT", _subscription(topic, subscription), _message_id(message_id))


@topics.command("unsubscribe")
@click.argument("topic")
@click.option("--subscription", "-s", required=True)
@click.option("--force", "-f", is_flag=True, help="Disconnect its consumers first.")
@click.pass_obj
def topics_unsubscribe(client: AdminClient, topic: str, subscription: str, force: bool) -> None:
    """Delete a subscription."""
    client.call("DELETE", f"{_subscription(topic, subscription)}?force={str(force).lower()}")


@topics.command("clear-backlog")
@click.argument("topic")
@click.option("--subscription", "-s", required=True)
@click.pass_obj
def topics_clear_backlog(client: AdminClient, topic: str, subscription: str) -> None:
    """Acknowledge everything the subscription has not yet."""
    client.call("POST", f"{_subscription(topic, subscription)}/skip_all")


@topics.command("skip")
@click.argument("topic")
@click.option("--subscription", "-s", required=True)
@click.option("--count", "-n", type=int, required=True, help="How many messages (entries) to skip.")
@click.pass_obj
def topics_skip(client: AdminClient, topic: str, subscription: str, count: int) -> None:
    """Acknowledge the next COUNT messages of the subscription."""
    client.call("POST", f"{_subscription(topic, subscription)}/skip/{count}")


@topics.command("expire-messages")
@click.argument("topic")
@click.option("--subscription", "-s", required=True)
@click.option("--expireTime", "--expire-time", "-t", "expire_time", required=True,
              help="Messages older than this are acknowledged (30s, 10m, 2h, 3d).")  # fmt: skip
@click.pass_obj
def topics_expire(client: AdminClient, topic: str, subscription: str, expire_time: str) -> None:
    """Acknowledge what was published longer ago than the expire time."""
    client.call(
        "POST", f"{_subscription(topic, subscription)}/expireMessages/{duration_seconds(expire_time)}"
    )


@topics.command("reset-cursor")
@click.argument("topic")
@click.option("--subscription", "-s", required=True)
@click.option("--time", "-t", "ago", default=None, help="Back to what was published this long ago (10m, 2h).")
@click.option("--messageId", "--message-id", "-m", "message_id", default=None,
              help="To this message: ledgerId:entryId, earliest or latest.")  # fmt: skip
@click.pass_obj
def topics_reset_cursor(
    client: AdminClient, topic: str, subscription: str, ago: str | None, message_id: str | None
) -> None:
    """Move the subscription back or forth, by time or to a message."""
    if (ago is None) == (message_id is None):
        raise click.UsageError("give one of --time and --messageId")
    path = f"{_subscription(topic, subscription)}/resetcursor"
    if message_id is not None:
        client.call("POST", path, _message_id(message_id))
        return
    client.call("POST", f"{path}/{int((time.time() - duration_seconds(ago or '0')) * 1000)}")


@topics.command("peek-messages")
@click.argument("topic")
@click.option("--subscription", "-s", required=True)
@click.option("--count", "-n", type=int, default=1, show_default=True)
@click.pass_obj
def topics_peek(client: AdminClient, topic: str, subscription: str, count: int) -> None:
    """The next COUNT unacknowledged messages of a subscription, without acknowledging them."""
    for n in range(1, count + 1):
        show(client.call("GET", f"{_subscription(topic, subscription)}/position/{n}"))


@topics.command("compact")
@click.argument("topic")
@click.pass_obj
def topics_compact(client: AdminClient, topic: str) -> None:
    """Start compacting TOPIC (the latest message per key); see compaction-status."""
    client.call("PUT", f"/admin/v2/{topic_path(topic)}/compaction")


@topics.command("compaction-status")
@click.argument("topic")
@click.option("--wait-complete", "-w", is_flag=True, help="Wait until the compaction has finished.")
@click.pass_obj
def topics_compaction_status(client: AdminClient, topic: str, wait_complete: bool) -> None:
    """NOT_RUN, RUNNING, SUCCESS or ERROR (with the reason) of TOPIC's last compaction."""
    status = client.call("GET", f"/admin/v2/{topic_path(topic)}/compaction")
    while wait_complete and isinstance(status, dict) and status.get("status") == "RUNNING":
        time.sleep(0.5)
        status = client.call("GET", f"/admin/v2/{topic_path(topic)}/compaction")
    show(status)
