"""Which admin calls a role may make (authorization_enabled), as Pulsar's admin resources decide:

* clusters: anyone authenticated reads them, super-users change them;
* the tenant list, brokers, broker stats and anything else broker-wide: super-users;
* a tenant (``/admin/v2/tenants/{tenant}``): its admins read it, super-users change it;
* a tenant's namespaces, topics and schemas (``/admin/v2/namespaces|persistent|non-persistent|
  schemas/{tenant}/…``): its admins and super-users;
* an HTTP lookup of a topic: a role that may produce or consume there.

A refusal is 403 naming the role and what it asked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from magnetar.broker.admin.http import ROLE, error
from magnetar.broker.authorization import Authorization, AuthorizationError
from magnetar.broker.topic import TopicName

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_TENANT_SCOPED = ("namespaces", "persistent", "non-persistent", "schemas")


def access_checks(authorization: Authorization) -> Middleware:
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if authorization.enabled:
            try:
                await _check(authorization, request)
            except AuthorizationError as exc:
                return error(403, str(exc))
        return await handler(request)

    return check


async def _check(authorization: Authorization, request: web.Request) -> None:
    role = request.get(ROLE)
    parts = [p for p in request.path.split("/") if p]
    what = f"{request.method} {request.path}"
    if parts[:3] == ["lookup", "v2", "topic"] and len(parts) >= 7:
        topic = TopicName.parse(f"{parts[3]}://{parts[4]}/{parts[5]}/{'/'.join(parts[6:])}")
        await authorization.check_topic(role, topic, "produce", "consume")
        return
    if parts[:2] != ["admin", "v2"] or len(parts) < 3:
        return  # /metrics and the like
    kind, rest = parts[2], parts[3:]
    if kind == "clusters" and request.method == "GET":
        return
    if kind in ("persistent", "non-persistent") and request.method == "GET" and rest[3:] == ["partitions"]:
        # A client's HTTP lookup asks the partition count first: a lookup, open to anyone who
        # may produce or consume there (Pulsar's TopicOperation.LOOKUP), not only tenant admins.
        topic = TopicName.parse(f"{kind}://{rest[0]}/{rest[1]}/{rest[2]}")
        await authorization.check_topic(role, topic, "produce", "consume")
        return
    if kind == "tenants" and rest:
        if request.method == "GET":
            await authorization.check_tenant_admin(role, rest[0], what)
        else:
            authorization.check_super_user(role, what)
        return
    if kind in _TENANT_SCOPED and rest:
        await authorization.check_tenant_admin(role, rest[0], what)
        return
    authorization.check_super_user(role, what)
