"""What every part of the admin REST shares: Pulsar's JSON errors, body checks, the metadata-store
probe, the dependencies it is built from, and finding the broker that serves a topic.

Errors are JSON ``{"reason": "..."}`` with Pulsar's status codes (404 unknown resource, 409
already exists, 412 invalid name or state, 400 malformed body, 503 while the metadata store
cannot be reached: retry). A call about a topic or bundle that reaches another broker than its
owner is answered with a 307 redirect to the owner, as Pulsar does.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from magnetar.admin.client import AdminError, AsyncAdminClient
from magnetar.broker.authorization import Authorization
from magnetar.broker.auto_creation import AutoTopicCreation
from magnetar.broker.compaction.topic_compactions import Compactions
from magnetar.broker.namespace import Bundle, NamespaceError, Namespaces, SplitCommit
from magnetar.broker.ownership import (
    BrokerInfo,
    LookupUrls,
    NotServedError,
    Owner,
    UnknownListenerError,
    web_url,
)
from magnetar.broker.partitions import PartitionedTopics
from magnetar.broker.policies.applied import PolicyUpdates
from magnetar.broker.schemas.admission import SchemaAdmission
from magnetar.broker.topic import InvalidTopicNameError, Topic, TopicName, TopicNotAllowedError
from magnetar.common.authentication.client import ClientCredentials
from magnetar.common.authentication.providers import Authentication
from magnetar.common.metadata import (
    BadVersionError,
    MetadataError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: the role a request's credentials proved (None while authentication is off)
ROLE: web.RequestKey[str | None] = web.RequestKey("role", str | None)  # type: ignore[arg-type]
_NODE_STATE_ERRORS = (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError)


def error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


#: Jetty's (Pulsar's web server's) limit on a request line
MAX_PATH_BYTES = 8192


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    if len(request.raw_path) > MAX_PATH_BYTES:
        return error(
            414, f"the request path has {len(request.raw_path)} bytes, over the limit of {MAX_PATH_BYTES}"
        )
    try:
        return await handler(request)
    except NamespaceError as exc:
        return error(exc.status, str(exc))
    except InvalidTopicNameError as exc:
        return error(412, str(exc))
    except TopicNotAllowedError as exc:
        return error(405, str(exc))
    except NotServedError as exc:
        return error(503, str(exc))
    except UnknownListenerError as exc:  # X-Pulsar-ListenerName names one the owner lacks
        return error(404, str(exc))
    except MetadataError as exc:
        if isinstance(exc, _NODE_STATE_ERRORS):
            raise  # a bug of the handler, not the store's state
        # a session being renewed or expired, ZooKeeper unreachable: the client may retry
        return error(503, f"metadata store unavailable: {exc}")
    except (json.JSONDecodeError, ValueError, KeyError, TypeError) as exc:
        return error(400, f"malformed request: {exc}")
    except web.HTTPException as exc:
        if exc.status < 400 or exc.content_type == "application/json":
            raise  # redirects, and errors already in JSON
        return error(exc.status, exc.reason)  # aiohttp's own (no such route, method not allowed)
    except Exception as exc:  # a bug of the broker's: logged with its traceback, answered in JSON
        log.exception("admin %s %s failed", request.method, request.path)
        return error(500, f"internal error: {type(exc).__name__}: {exc}")


#: how long an admin call waits for the metadata stores before answering 503
STORE_PROBE_S = 1.5


async def probe(stores: list[MetadataStore]) -> None:
    """One round trip to each distinct store; MetadataError when one does not answer in time."""
    distinct = {id(s): s for s in stores}.values()
    try:
        await asyncio.wait_for(asyncio.gather(*(s.exists("/") for s in distinct)), STORE_PROBE_S)
    except TimeoutError:
        raise MetadataError(f"no answer within {STORE_PROBE_S} s") from None


async def json_object(request: web.Request, *, nullable: bool = False) -> dict[str, Any]:
    """The request's JSON object ({} without a body, or for ``null`` when ``nullable``); 400
    for any other JSON value."""
    body = await request.json() if request.can_read_body else {}
    if body is None and nullable:
        return {}
    if not isinstance(body, dict):
        raise NamespaceError(f"expected a JSON object, not {type(body).__name__}", 400)
    return body


def query_flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def cluster_names(body: dict[str, Any], key: str, default: list[str]) -> list[str]:
    value = body.get(key, default)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise NamespaceError(f"{key} must be a list of cluster names, not {value!r}", 400)
    return value


class BundleAdmin(Protocol):
    """The bundles' side of the admin API (broker/loadbalance/bundles.py)."""

    @property
    def broker_id(self) -> str: ...

    def owns(self, namespace: str, bundle: Bundle) -> bool: ...

    async def owner(self, namespace: str, bundle: Bundle) -> Owner | None: ...

    async def brokers(self) -> list[BrokerInfo]: ...

    async def bundle_of(self, topic: TopicName) -> tuple[str, Bundle]: ...

    async def lookup(
        self, topic: str, *, authoritative: bool = False, listener: str | None = None
    ) -> tuple[LookupUrls, bool]: ...

    async def unload(self, namespace: str, bundle: Bundle) -> list[str]: ...

    async def transfer(self, namespace: str, bundle: Bundle, destination: str) -> list[str]: ...

    async def split(self, namespace: str, bundle: Bundle, commit: SplitCommit) -> tuple[Bundle, Bundle]: ...


class TopicAdmin(Protocol):
    """The topics' side of the admin API (broker/topics.py)."""

    def get(self, name: str) -> Topic | None: ...

    async def get_or_load(self, name: str) -> Topic: ...

    async def evict(self, topics: list[Topic]) -> None: ...

    async def delete(self, topic: Topic) -> None: ...

    async def topics_of_namespace(self, namespace: str, domains: Sequence[str] = ...) -> list[str]: ...


@dataclass(frozen=True)
class AdminDeps:
    cluster_name: str
    namespaces: Namespaces
    bundles: BundleAdmin
    topics: TopicAdmin
    partitioned: PartitionedTopics
    replication_stats: Callable[[Topic], dict[str, dict[str, object]]]
    #: the topics' policies: topic-level ones stored and applied to loaded topics
    policies: PolicyUpdates
    #: partition counts that create a partitioned topic when auto creation says so
    auto_creation: AutoTopicCreation
    #: the load manager's leader broker id, None while none is elected
    leader: Callable[[], Awaitable[str | None]]
    #: the metadata stores an admin call may need (probed before each call)
    stores: list[MetadataStore]
    #: the schema registry and the strategy each topic's policies give it
    schemas: SchemaAdmission
    #: topic compaction (start, status)
    compactions: Compactions
    #: who an admin call comes from (authentication_enabled), and how this broker's own calls
    #: to other brokers say who it is
    authentication: Authentication = field(default_factory=Authentication)
    broker_credentials: ClientCredentials = field(default_factory=ClientCredentials)
    #: what a role may do (authorization_enabled); None: everything
    authorization: Authorization | None = None
    #: the listener advertised at a local address (BrokerConfig.listener_at): redirects name the
    #: owner on the listener the request came in by
    listener_at: Callable[[str, int], str | None] = lambda host, port: None


def listener_of(request: web.Request, listener_at: Callable[[str, int], str | None]) -> str | None:
    """The listener a request is for: named by Pulsar's ``X-Pulsar-ListenerName`` header, else
    the one advertised at the address it came in at (None: the default)."""
    named = request.headers.get("X-Pulsar-ListenerName", "").strip()
    if named:
        return named
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        return listener_at(str(sockname[0]), int(sockname[1]))
    return None


def namespace_of(request: web.Request) -> str:
    return f"{request.match_info['tenant']}/{request.match_info['namespace']}"


#: the topic domain in admin paths (``/admin/v2/persistent/…``, ``/admin/v2/non-persistent/…``)
DOMAIN = "{domain:persistent|non-persistent}"


def domain_of(request: web.Request) -> str:
    return request.match_info.get("domain", "persistent")


def topic_of(request: web.Request) -> TopicName:
    return TopicName.parse(f"{domain_of(request)}://{namespace_of(request)}/{request.match_info['topic']}")


class Owners:
    """Where a call about a bundle or a topic is served: here, or at the owner's (a 307)."""

    def __init__(
        self,
        bundles: BundleAdmin,
        topics: TopicAdmin,
        credentials: ClientCredentials | None = None,
        listener_at: Callable[[str, int], str | None] = lambda host, port: None,
    ) -> None:
        self._bundles = bundles
        self._topics = topics
        self._credentials = credentials
        self._listener_at = listener_at

    async def forward(self, request: web.Request, namespace: str, bundle: Bundle) -> None:
        """Raise a 307 to the owning broker's same URL unless this broker owns the bundle: its
        https:// one for a request over TLS, on the request's listener."""
        owner = await self._bundles.owner(namespace, bundle)
        if owner is not None and owner.broker_id != self._bundles.broker_id:
            url = web_url(owner, listener_of(request, self._listener_at), secure=request.secure)
            raise web.HTTPTemporaryRedirect(f"{url}{request.rel_url}")

    async def topic(self, request: web.Request) -> Topic:
        """The request's topic, loaded here (created if new) when this broker owns its bundle; a
        bundle nobody owns is assigned first."""
        name = topic_of(request)
        topic = self._topics.get(str(name))
        if topic is None:
            namespace, bundle = await self._bundles.bundle_of(name)
            if await self._bundles.owner(namespace, bundle) is None:
                await self._bundles.lookup(str(name))  # assigns the bundle, as a client's lookup does
            await self.forward(request, namespace, bundle)
            topic = await self._topics.get_or_load(str(name))
        return topic

    async def delete_topic(self, name: str, *, force: bool) -> None:
        """Pulsar's ``topics delete`` of ``name`` through the admin REST, so it runs where the
        topic is served; one already gone is what was asked."""
        me = next((b for b in await self._bundles.brokers() if b.broker_id == self._bundles.broker_id), None)
        if me is None:
            raise NamespaceError("this broker is not registered: cannot delete topics", 503)
        path = f"/admin/v2/{name.replace('://', '/', 1)}?force={str(force).lower()}"
        try:
            await AsyncAdminClient(me.web_service_url, credentials=self._credentials).request("DELETE", path)
        except AdminError as exc:
            if exc.status != 404:
                raise NamespaceError(f"deleting {name}: {exc}", exc.status or 502) from None
