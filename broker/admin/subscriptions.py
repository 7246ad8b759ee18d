"""The admin REST API's subscriptions and messages, as Pulsar's ``/admin/v2/persistent/…``
answers them: create (at a position), delete, clear-backlog, skip, expire, reset-cursor (by
publish time or message id), peek-messages, get-message-by-id and examine-message."""

from __future__ import annotations

from aiohttp import web

from magnetar.broker.admin.http import DOMAIN, Owners, error, query_flag
from magnetar.broker.admin.messages import message_response, parse_message_id
from magnetar.broker.consumer import SubType
from magnetar.broker.managed_ledger import InitialPosition, Position
from magnetar.broker.namespace import NamespaceError
from magnetar.broker.policies import message_expiry
from magnetar.broker.subscription import Subscription
from magnetar.broker.topic import Topic

#: Pulsar's MessageId.latest (Long.MAX_VALUE) and MessageId.earliest (-1:-1)
_LATEST_LEDGER = 2**63 - 1


def _count(request: web.Request, key: str) -> int:
    try:
        value = int(request.match_info[key])
    except ValueError:
        value = -1
    if value < 0:
        raise NamespaceError(f"{key} must be a non-negative integer, not {request.match_info[key]!r}", 412)
    return value


class SubscriptionAdminApi:
    def __init__(self, owners: Owners) -> None:
        self._owners = owners

    def install(self, app: web.Application) -> None:
        r = app.router
        topic = f"/admin/v2/{DOMAIN}/{{tenant}}/{{namespace}}/{{topic}}"
        sub = f"{topic}/subscription/{{subscription}}"
        r.add_get(f"{topic}/subscriptions", self.subscriptions)
        r.add_put(sub, self.create_subscription)
        r.add_delete(sub, self.delete_subscription)
        r.add_post(f"{sub}/skip_all", self.clear_backlog)
        r.add_post(f"{sub}/skip/{{count}}", self.skip)
        r.add_post(f"{sub}/expireMessages/{{seconds}}", self.expire)
        r.add_post(f"{topic}/all_subscription/expireMessages/{{seconds}}", self.expire_all)
        r.add_post(f"{sub}/resetcursor/{{timestamp}}", self.reset_cursor)
        r.add_post(f"{sub}/resetcursor", self.reset_cursor_to_message)
        r.add_get(f"{sub}/position/{{n}}", self.peek)
        r.add_get(f"{topic}/ledger/{{ledger}}/entry/{{entry}}", self.get_message)
        r.add_get(f"{topic}/examinemessage", self.examine)

    async def _subscription(self, request: web.Request) -> tuple[Topic, Subscription]:
        topic = await self._owners.topic(request)
        subscription = topic.subscriptions.get(request.match_info["subscription"])
        if subscription is None or not subscription.durable:
            raise NamespaceError(f"no subscription {request.match_info['subscription']} on {topic.name}", 404)
        return topic, subscription

    async def subscriptions(self, request: web.Request) -> web.Response:
        topic = await self._owners.topic(request)
        return web.json_response(sorted(topic.subscriptions))

    # -- lifecycle ------------------------------------------------------------------------------
    async def create_subscription(self, request: web.Request) -> web.Response:
        """A durable subscription at the message id in the body (MessageId.latest without one;
        Shared until a consumer attaches)."""
        topic = await self._owners.topic(request)
        name = request.match_info["subscription"]
        body = await request.json() if request.can_read_body else None
        ledger_id, entry_id = (_LATEST_LEDGER, _LATEST_LEDGER) if body is None else parse_message_id(body)
        if name in topic.subscriptions or name in topic.ledger.cursors:
            return error(409, f"subscription {name} already exists on {topic.name}")
        earliest = ledger_id < 0
        initial = InitialPosition.EARLIEST if earliest else InitialPosition.LATEST
        subscription = await topic.subscription(name, SubType.Shared, initial)
        if not earliest and ledger_id != _LATEST_LEDGER:
            await subscription.seek(Position(ledger_id, entry_id))
        return web.Response(status=204)

    async def delete_subscription(self, request: web.Request) -> web.Response:
        topic, subscription = await self._subscription(request)
        if subscription.consumers and not query_flag(request, "force"):
            return error(412, f"subscription {subscription.name} has consumers (force=true closes them)")
        for consumer in list(subscription.consumers):
            consumer.close_by_broker()
            subscription.remove_consumer(consumer)
        await topic.unsubscribe(subscription.name)
        return web.Response(status=204)

    # -- moving the cursor ----------------------------------------------------------------------
    async def clear_backlog(self, request: web.Request) -> web.Response:
        """Everything stored so far counts as acknowledged; consumers reconnect from the end."""
        topic, subscription = await self._subscription(request)
        last = topic.ledger.last_confirmed_entry
        if last is not None:
            await subscription.seek(topic.ledger.next_position(last))
        return web.Response(status=204)

    async def skip(self, request: web.Request) -> web.Response:
        """The next ``count`` unacknowledged messages (entries) count as acknowledged."""
        _, subscription = await self._subscription(request)
        await subscription.skip(_count(request, "count"))
        return web.Response(status=204)

    async def expire(self, request: web.Request) -> web.Response:
        topic, subscription = await self._subscription(request)
        await message_expiry.expire(topic, subscription, _count(request, "seconds"))
        return web.Response(status=204)

    async def expire_all(self, request: web.Request) -> web.Response:
        topic = await self._owners.topic(request)
        await message_expiry.expire_all(topic, _count(request, "seconds"))
        return web.Response(status=204)

    async def reset_cursor(self, request: web.Request) -> web.Response:
        """Move the subscription to the first message published at or after ``timestamp`` (ms)."""
        topic, subscription = await self._subscription(request)
        try:
            at_ms = int(request.match_info["timestamp"])
        except ValueError:
            given = request.match_info["timestamp"]
            return error(412, f"timestamp must be milliseconds since the epoch, not {given!r}")
        await subscription.seek(await topic.position_published_since(at_ms))
        return web.Response(status=204)

    async def reset_cursor_to_message(self, request: web.Request) -> web.Response:
        """Move the subscription to a message id (after it with ``isExcluded=true``)."""
        topic, subscription = await self._subscription(request)
        ledger_id, entry_id = parse_message_id(await request.json())
        if ledger_id < 0:
            target = topic.ledger.first_position()
        elif ledger_id == _LATEST_LEDGER:
            last = topic.ledger.last_confirmed_entry
            target = topic.ledger.next_position(last) if last else topic.ledger.first_position()
        else:
            target = Position(ledger_id, entry_id)
            if query_flag(request, "isExcluded"):
                target = topic.ledger.next_position(target)
        await subscription.seek(target)
        return web.Response(status=204)

    # -- reading messages -----------------------------------------------------------------------
    async def peek(self, request: web.Request) -> web.Response:
        """The n-th (from 1) unacknowledged message of the subscription."""
        topic, subscription = await self._subscription(request)
        n = _count(request, "n")
        pending = subscription.pending(n) if n > 0 else []
        if len(pending) < n or n == 0:
            return error(404, f"subscription {subscription.name} has no message at position {n}")
        return await self._message(topic, pending[-1])

    async def get_message(self, request: web.Request) -> web.Response:
        topic = await self._owners.topic(request)
        return await self._message(topic, Position(_count(request, "ledger"), _count(request, "entry")))

    async def examine(self, request: web.Request) -> web.Response:
        """The n-th message from the start (``initialPosition=earliest``) or from the end
        (``latest``, the default; n=1 is the last message)."""
        topic = await self._owners.topic(request)
        initial = request.query.get("initialPosition", "latest")
        try:
            n = int(request.query.get("messagePosition", "1"))
        except ValueError:
            n = 0
        if initial not in ("earliest", "latest") or n < 1:
            return error(412, "initialPosition must be earliest or latest and messagePosition at least 1")
        ledger = topic.ledger
        if initial == "earliest":
            position: Position | None = ledger.first_position()
            for _ in range(n - 1):
                position = ledger.next_position(position) if position is not None else None
        else:
            position = ledger.last_confirmed_entry
            for _ in range(n - 1):
                position = ledger.previous_position(position) if position is not None else None
        if position is None:
            return error(404, f"{topic.name} has no message at position {n} from the {initial}")
        return await self._message(topic, position)

    async def _message(self, topic: Topic, position: Position) -> web.Response:
        entry = await topic.ledger.read_entry(position) if topic.ledger.has_entry(position) else None
        if entry is None:
            return error(404, f"message {position} not found on {topic.name}")
        return message_response(entry)
