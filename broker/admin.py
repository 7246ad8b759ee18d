"""The admin REST API: the subset of Pulsar's ``/admin/v2`` the chaos lab and users need.

Errors are JSON ``{"reason": "..."}`` with Pulsar's status codes (404 unknown resource, 409
already exists, 412 invalid name, 400 malformed body, 503 while the metadata store cannot be
reached: retry). Bundle operations go to the owning broker
(a request reaching another broker is answered with a 307 redirect to the owner, as Pulsar does).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from magnetar.broker.consumer import SubType
from magnetar.broker.managed_ledger import InitialPosition
from magnetar.broker.namespace import Bundle, NamespaceError, NamespacePolicies, Namespaces, even_boundaries
from magnetar.broker.ownership import BrokerInfo, NotServedError, Owner
from magnetar.broker.partitions import PartitionedTopics
from magnetar.broker.subscription import Subscription
from magnetar.broker.topic import InvalidTopicNameError, Topic, TopicName
from magnetar.common.admin_client import AdminError, AsyncAdminClient
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
_NODE_STATE_ERRORS = (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError)


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except NamespaceError as exc:
        return _error(exc.status, str(exc))
    except InvalidTopicNameError as exc:
        return _error(412, str(exc))
    except NotServedError as exc:
        return _error(503, str(exc))
    except MetadataError as exc:
        if isinstance(exc, _NODE_STATE_ERRORS):
            raise  # a bug of the handler, not the store's state
        # a session being renewed or expired, ZooKeeper unreachable: the client may retry
        return _error(503, f"metadata store unavailable: {exc}")
    except (json.JSONDecodeError, ValueError, KeyError, TypeError) as exc:
        return _error(400, f"malformed request: {exc}")
    except web.HTTPException as exc:
        if exc.status < 400 or exc.content_type == "application/json":
            raise  # redirects, and errors already in JSON
        return _error(exc.status, exc.reason)  # aiohttp's own (no such route, method not allowed)
    except Exception as exc:  # a bug of the broker's: logged with its traceback, answered in JSON
        log.exception("admin %s %s failed", request.method, request.path)
        return _error(500, f"internal error: {type(exc).__name__}: {exc}")


#: how long an admin call waits for the metadata stores before answering 503
STORE_PROBE_S = 1.5


async def probe(stores: list[MetadataStore]) -> None:
    """One round trip to each distinct store; MetadataError when one does not answer in time."""
    distinct = {id(s): s for s in stores}.values()
    try:
        await asyncio.wait_for(asyncio.gather(*(s.exists("/") for s in distinct)), STORE_PROBE_S)
    except TimeoutError:
        raise MetadataError(f"no answer within {STORE_PROBE_S} s") from None


async def _object(request: web.Request) -> dict[str, Any]:
    """The request's JSON object ({} without a body); 400 for any other JSON value."""
    body = await request.json() if request.can_read_body else {}
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            text=json.dumps({"reason": f"expected a JSON object, not {type(body).__name__}"}),
            content_type="application/json",
        )
    return body


def _names(body: dict[str, Any], key: str, default: list[str]) -> list[str]:
    value = body.get(key, default)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise NamespaceError(f"{key} must be a list of cluster names, not {value!r}", 400)
    return value


class BundleAdmin(Protocol):
    """The bundles' side of the admin API (broker/bundles.py)."""

    @property
    def broker_id(self) -> str: ...

    def owns(self, namespace: str, bundle: Bundle) -> bool: ...

    async def owner(self, namespace: str, bundle: Bundle) -> Owner | None: ...

    async def brokers(self) -> list[BrokerInfo]: ...

    async def bundle_of(self, topic: TopicName) -> tuple[str, Bundle]: ...

    async def lookup(
        self, topic: str, *, authoritative: bool = False, listener: str | None = None
    ) -> tuple[str, bool]: ...

    async def unload(self, namespace: str, bundle: Bundle) -> list[str]: ...

    async def transfer(self, namespace: str, bundle: Bundle, destination: str) -> list[str]: ...


class TopicAdmin(Protocol):
    """The topics' side of the admin API (broker/topics.py)."""

    def get(self, name: str) -> Topic | None: ...

    async def get_or_load(self, name: str) -> Topic: ...

    async def evict(self, topics: list[Topic]) -> None: ...

    async def topics_of_namespace(self, namespace: str) -> list[str]: ...


@dataclass(frozen=True)
class AdminDeps:
    cluster_name: str
    namespaces: Namespaces
    bundles: BundleAdmin
    topics: TopicAdmin
    partitioned: PartitionedTopics
    replication_stats: Callable[[Topic], dict[str, dict[str, object]]]
    #: the load manager's leader broker id, None while none is elected
    leader: Callable[[], Awaitable[str | None]]
    #: the metadata stores an admin call may need (probed before each call)
    stores: list[MetadataStore]


class AdminApi:
    def __init__(self, deps: AdminDeps) -> None:
        self._deps = deps
        self._bundles = deps.bundles
        self._topics = deps.topics

    def install(self, app: web.Application) -> None:
        app.middlewares.append(errors)
        app.middlewares.append(self._store_reachable)
        r = app.router
        r.add_get("/admin/v2/clusters", self.clusters)
        r.add_get("/admin/v2/clusters/{cluster}", self.cluster)
        r.add_put("/admin/v2/clusters/{cluster}", self.create_cluster)
        r.add_get("/admin/v2/tenants", self.tenants)
        r.add_put("/admin/v2/tenants/{tenant}", self.create_tenant)
        r.add_get("/admin/v2/tenants/{tenant}", self.tenant)
        r.add_delete("/admin/v2/tenants/{tenant}", self.delete_tenant)
        r.add_get("/admin/v2/namespaces/{tenant}", self.namespaces)
        r.add_put("/admin/v2/namespaces/{tenant}/{namespace}", self.create_namespace)
        r.add_get("/admin/v2/namespaces/{tenant}/{namespace}", self.policies)
        r.add_delete("/admin/v2/namespaces/{tenant}/{namespace}", self.delete_namespace)
        r.add_get("/admin/v2/namespaces/{tenant}/{namespace}/replication", self.replication)
        r.add_get("/admin/v2/namespaces/{tenant}/{namespace}/deduplication", self.deduplication)
        r.add_post("/admin/v2/namespaces/{tenant}/{namespace}/deduplication", self.set_deduplication)
        r.add_delete("/admin/v2/namespaces/{tenant}/{namespace}/deduplication", self.remove_deduplication)
        r.add_post("/admin/v2/namespaces/{tenant}/{namespace}/replication", self.set_replication)
        r.add_get("/admin/v2/namespaces/{tenant}/{namespace}/bundles", self.bundles)
        r.add_post(
            "/admin/v2/namespaces/{tenant}/{namespace}/replicatedSubscriptionsSnapshotFrequency",
            self.set_snapshot_frequency,
        )
        r.add_post(
            "/admin/v2/namespaces/{tenant}/{namespace}/replicatedSubscriptionsCarryAcks", self.set_carry_acks
        )
        r.add_put("/admin/v2/namespaces/{tenant}/{namespace}/unload", self.unload_namespace)
        r.add_put("/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload", self.unload_bundle)
        r.add_put("/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split", self.split_bundle)
        r.add_get("/admin/v2/persistent/{tenant}/{namespace}", self.topics)
        r.add_get("/admin/v2/persistent/{tenant}/{namespace}/{topic}/stats", self.topic_stats)
        r.add_get("/admin/v2/persistent/{tenant}/{namespace}/{topic}/internalStats", self.internal_stats)
        r.add_get("/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscriptions", self.subscriptions)
        r.add_put("/admin/v2/persistent/{tenant}/{namespace}/{topic}/unload", self.unload_topic)
        sub = "/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{subscription}"
        r.add_put(sub, self.create_subscription)
        r.add_delete(sub, self.delete_subscription)
        r.add_post(f"{sub}/skip_all", self.clear_backlog)
        r.add_post(f"{sub}/resetcursor/{{timestamp}}", self.reset_cursor)
        r.add_get("/admin/v2/persistent/{tenant}/{namespace}/{topic}/bundle", self.topic_bundle)
        r.add_get("/admin/v2/brokers/leaderBroker", self.leader)
        r.add_get("/admin/v2/brokers/{cluster}", self.brokers)
        r.add_get("/admin/v2/persistent/{tenant}/{namespace}/partitioned", self.partitioned_topics)
        r.add_get("/admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions", self.partitions)
        r.add_put("/admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions", self.create_partitioned)
        r.add_post("/admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions", self.update_partitioned)
        r.add_delete("/admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions", self.delete_partitioned)
        r.add_get("/lookup/v2/topic/persistent/{tenant}/{namespace}/{topic}", self.lookup)

    @web.middleware
    async def _store_reachable(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """While the metadata store is out of reach, admin calls answer 503 at once instead of
        hanging until the store client notices (seconds to tens of seconds of a frozen store)."""
        if request.path.startswith(("/admin/", "/lookup/")):
            await probe(self._deps.stores)
        return await handler(request)

    @property
    def _namespaces(self) -> Namespaces:
        return self._deps.namespaces

    # -- clusters and tenants -------------------------------------------------------------------
    async def clusters(self, request: web.Request) -> web.Response:
        return web.json_response(await self._namespaces.clusters())

    async def cluster(self, request: web.Request) -> web.Response:
        return web.json_response(await self._namespaces.cluster(request.match_info["cluster"]))

    async def create_cluster(self, request: web.Request) -> web.Response:
        """Register a cluster (region) in the configuration store (its brokers also register it
        when they start)."""
        name = request.match_info["cluster"]
        body = await _object(request)
        service_url, broker_url = body.get("serviceUrl", ""), body.get("brokerServiceUrl", "")
        if not isinstance(broker_url, str) or not broker_url.startswith("pulsar://"):
            return _error(412, f"brokerServiceUrl must be a pulsar://host:port URL, not {broker_url!r}")
        if name in await self._namespaces.clusters():
            return _error(409, f"cluster {name} already exists")
        await self._namespaces.set_cluster(
            name, str(service_url), broker_url, str(body.get("listenerName", ""))
        )
        return web.Response(status=204)

    async def _check_clusters(self, clusters: list[str]) -> None:
        known = set(await self._namespaces.clusters())
        unknown = sorted(set(clusters) - known)
        if unknown:
            raise NamespaceError(f"unknown clusters {unknown} (known: {sorted(known)})", 412)

    async def tenants(self, request: web.Request) -> web.Response:
        return web.json_response(await self._namespaces.tenants())

    async def create_tenant(self, request: web.Request) -> web.Response:
        body = await _object(request)
        clusters = _names(body, "allowedClusters", [self._deps.cluster_name])
        await self._namespaces.create_tenant(request.match_info["tenant"], clusters)
        return web.Response(status=204)

    async def tenant(self, request: web.Request) -> web.Response:
        return web.json_response(await self._namespaces.tenant(request.match_info["tenant"]))

    async def delete_tenant(self, request: web.Request) -> web.Response:
        await self._namespaces.delete_tenant(request.match_info["tenant"])
        return web.Response(status=204)

    # -- namespaces -----------------------------------------------------------------------------
    def _ns(self, request: web.Request) -> str:
        return f"{request.match_info['tenant']}/{request.match_info['namespace']}"

    async def namespaces(self, request: web.Request) -> web.Response:
        return web.json_response(await self._namespaces.namespaces(request.match_info["tenant"]))

    async def create_namespace(self, request: web.Request) -> web.Response:
        body = await _object(request)
        policies = NamespacePolicies()
        bundles = body.get("bundles", {}).get("numBundles") if isinstance(body.get("bundles"), dict) else None
        if bundles is not None:
            if not isinstance(bundles, int) or not 1 <= bundles <= 1024:
                return _error(412, f"numBundles must be an integer in 1..1024, not {bundles!r}")
            policies.boundaries = even_boundaries(bundles)
        key = "replication_clusters" if "replication_clusters" in body else "replicationClusters"
        policies.replication_clusters = _names(body, key, []) or [self._deps.cluster_name]
        await self._check_clusters(policies.replication_clusters)
        await self._namespaces.create(self._ns(request), policies)
        return web.Response(status=204)

    async def policies(self, request: web.Request) -> web.Response:
        policies = await self._namespaces.policies(self._ns(request))
        doc = policies.model_dump()
        doc["bundles"] = {"boundaries": [f"0x{b:08x}" for b in policies.boundaries[:-1]] + ["0xffffffff"],
                          "numBundles": len(policies.bundles())}  # fmt: skip
        return web.json_response(doc)

    async def delete_namespace(self, request: web.Request) -> web.Response:
        """Pulsar's rule: a namespace that holds topics is not deleted (409); deleting them with
        it (``force``) is not built yet, and says so."""
        namespace = self._ns(request)
        await self._namespaces.policies(namespace)  # 404 for a namespace that does not exist
        if request.query.get("force", "false").lower() == "true":
            return _error(412, "force deletion of a namespace and its topics is not supported yet")
        topics = await self._topics.topics_of_namespace(namespace) + await self._deps.partitioned.list(
            namespace
        )
        if topics:
            shown = ", ".join(topics[:3]) + (f" and {len(topics) - 3} more" if len(topics) > 3 else "")
            return _error(409, f"cannot delete non-empty namespace {namespace}: it holds {shown}")
        await self._namespaces.delete(namespace)
        return web.Response(status=204)

    async def replication(self, request: web.Request) -> web.Response:
        return web.json_response((await self._namespaces.policies(self._ns(request))).replication_clusters)

    async def set_replication(self, request: web.Request) -> web.Response:
        clusters = await request.json()
        if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters):
            return _error(400, "expected a JSON list of cluster names")
        if not clusters:
            return _error(412, "a namespace needs at least one cluster")
        await self._check_clusters(clusters)
        await self._namespaces.update(self._ns(request), {"replication_clusters": clusters})
        return web.Response(status=204)

    async def deduplication(self, request: web.Request) -> web.Response:
        """The namespace's message deduplication (null: the broker's ``broker_deduplication_enabled``)."""
        return web.json_response((await self._namespaces.policies(self._ns(request))).deduplication_enabled)

    async def set_deduplication(self, request: web.Request) -> web.Response:
        """Pulsar's ``namespaces set-deduplication``: applies to topics loaded from now on (a
        topic already loaded keeps its setting until it is unloaded)."""
        enabled = await request.json()
        if not isinstance(enabled, bool):
            return _error(412, f"expected true or false, not {enabled!r}")
        await self._namespaces.update(self._ns(request), {"deduplication_enabled": enabled})
        return web.Response(status=204)

    async def remove_deduplication(self, request: web.Request) -> web.Response:
        await self._namespaces.update(self._ns(request), {"deduplication_enabled": None})
        return web.Response(status=204)

    async def set_snapshot_frequency(self, request: web.Request) -> web.Response:
        """PIP-33 snapshot frequency of the namespace's topics (milliseconds, at least 50;
        null: the broker's default)."""
        millis = await request.json()
        if millis is not None and (not isinstance(millis, int) or millis < 50):
            return _error(412, f"the snapshot frequency is at least 50 ms, not {millis!r}")
        await self._namespaces.update(
            self._ns(request), {"replicated_subscriptions_snapshot_frequency_millis": millis}
        )
        return web.Response(status=204)

    async def set_carry_acks(self, request: web.Request) -> web.Response:
        """Beyond PIP-33 (a) for the namespace (true/false; null: the broker's setting)."""
        carry = await request.json()
        if carry is not None and not isinstance(carry, bool):
            return _error(412, f"expected true, false or null, not {carry!r}")
        await self._namespaces.update(self._ns(request), {"replicated_subscriptions_carry_acks": carry})
        return web.Response(status=204)

    async def bundles(self, request: web.Request) -> web.Response:
        policies = await self._namespaces.policies(self._ns(request))
        boundaries = [f"0x{b:08x}" for b in policies.boundaries[:-1]] + ["0xffffffff"]
        return web.json_response({"boundaries": boundaries, "numBundles": len(policies.bundles())})

    async def _forward_to_owner(
        self, request: web.Request, namespace: str, bundle: Bundle
    ) -> web.Response | None:
        """A 307 to the owning broker's same URL, or None when this broker owns the bundle."""
        owner = await self._bundles.owner(namespace, bundle)
        if owner is None or owner.broker_id == self._bundles.broker_id:
            return None
        raise web.HTTPTemporaryRedirect(f"{owner.web_service_url}{request.rel_url}")

    async def unload_namespace(self, request: web.Request) -> web.Response:
        namespace = self._ns(request)
        policies = await self._namespaces.policies(namespace)
        for bundle in policies.bundles():
            owner = await self._bundles.owner(namespace, bundle)
            if owner is not None and owner.broker_id == self._bundles.broker_id:
                await self._bundles.unload(namespace, bundle)
            elif owner is not None:
                path = f"/admin/v2/namespaces/{namespace}/{bundle.name}/unload"
                try:
                    await AsyncAdminClient(owner.web_service_url).request("PUT", path)
                except AdminError as exc:
                    raise NamespaceError(f"{owner.broker_id}: {exc}", 502) from None
        return web.Response(status=204)

    async def _owned_bundle(self, request: web.Request) -> tuple[str, Bundle]:
        namespace = self._ns(request)
        bundle = Bundle.parse(request.match_info["bundle"])
        if bundle not in (await self._namespaces.policies(namespace)).bundles():
            raise NamespaceError(f"bundle {bundle.name} is not a bundle of {namespace}")
        return namespace, bundle

    async def unload_bundle(self, request: web.Request) -> web.Response:
        namespace, bundle = await self._owned_bundle(request)
        await self._forward_to_owner(request, namespace, bundle)
        destination = request.query.get("destinationBroker")
        if destination:
            topics = await self._bundles.transfer(namespace, bundle, destination)
        else:
            topics = await self._bundles.unload(namespace, bundle)
        return web.json_response({"bundle": bundle.name, "topics": topics, "destinationBroker": destination})

    async def split_bundle(self, request: web.Request) -> web.Response:
        namespace, bundle = await self._owned_bundle(request)
        await self._forward_to_owner(request, namespace, bundle)
        if self._bundles.owns(namespace, bundle):
            await self._bundles.unload(namespace, bundle)  # topics re-home under the halves
        low, high = await self._namespaces.split(namespace, bundle)
        return web.json_response({"bundles": [low.name, high.name]})

    # -- topics ---------------------------------------------------------------------------------
    def _topic(self, request: web.Request) -> TopicName:
        return TopicName.parse(f"persistent://{self._ns(request)}/{request.match_info['topic']}")

    async def topics(self, request: web.Request) -> web.Response:
        await self._namespaces.policies(self._ns(request))
        return web.json_response(await self._topics.topics_of_namespace(self._ns(request)))

    async def _served(self, request: web.Request) -> Topic:
        name = self._topic(request)
        topic = self._topics.get(str(name))
        if topic is None:
            namespace, bundle = await self._bundles.bundle_of(name)
            await self._forward_to_owner(request, namespace, bundle)
            topic = await self._topics.get_or_load(str(name))
        return topic

    async def topic_stats(self, request: web.Request) -> web.Response:
        topic = await self._served(request)
        return web.json_response(
            {
                "msgInCounter": topic.messages_in - topic.markers_in,
                # PIP-33 markers stored, apart from user messages (never in msgInCounter/backlogs)
                "markerMessagesCounter": topic.markers.count,
                "bytesInCounter": topic.ledger.bytes_added,
                "storageSize": topic.ledger.total_size,
                "replication": self._deps.replication_stats(topic),
                "replicatedSubscriptions": (
                    topic.replicated_subscriptions.stats() if topic.replicated_subscriptions else None
                ),
                "publishers": [
                    {"producerName": p.name, "msgInCounter": p.messages_in} for p in topic.producers.values()
                ],
                "subscriptions": {
                    name: {
                        "msgBacklog": sub.backlog,
                        "type": _type_name(sub.sub_type),
                        "isReplicated": sub.replicated,
                        "consumers": [
                            {
                                "consumerName": c.name,
                                "availablePermits": c.permits,
                                "unackedMessages": sum(c.pending.values()),
                            }
                            for c in sub.consumers
                        ],
                    }
                    for name, sub in topic.subscriptions.items()
                },
            }
        )

    async def internal_stats(self, request: web.Request) -> web.Response:
        topic = await self._served(request)
        ledger = topic.ledger
        last = ledger.last_confirmed_entry
        return web.json_response(
            {
                "entriesAddedCounter": ledger.entries_added,
                "numberOfEntries": ledger.number_of_entries,
                "totalSize": ledger.total_size,
                "lastConfirmedEntry": str(last) if last else "-1:-1",
                "ledgers": [
                    {"ledgerId": i.ledger_id, "entries": i.entries, "size": i.size} for i in ledger.ledgers
                ],
                "cursors": {
                    name: {
                        "markDeletePosition": str(c.mark_delete_position),
                        "readPosition": str(c.read_position),
                        "individuallyDeletedMessages": str([str(p) for p in c.individually_deleted]),
                    }
                    for name, c in ledger.cursors.items()
                },
            }
        )

    async def subscriptions(self, request: web.Request) -> web.Response:
        topic = await self._served(request)
        return web.json_response(sorted(topic.subscriptions))

    # -- subscriptions (Pulsar's topics create-subscription, unsubscribe, clear-backlog, reset-cursor)
    async def create_subscription(self, request: web.Request) -> web.Response:
        """A durable subscription starting at the end (Shared until a consumer attaches)."""
        topic = await self._served(request)
        name = request.match_info["subscription"]
        if name in topic.subscriptions or name in topic.ledger.cursors:
            return _error(409, f"subscription {name} already exists on {topic.name}")
        await topic.subscription(name, SubType.Shared, InitialPosition.LATEST)
        return web.Response(status=204)

    async def delete_subscription(self, request: web.Request) -> web.Response:
        topic, subscription = await self._subscription(request)
        if subscription.consumers and request.query.get("force", "false").lower() != "true":
            return _error(
                412, f"subscription {subscription.name} has connected consumers (force=true closes them)"
            )
        for consumer in list(subscription.consumers):
            consumer.close_by_broker()
            subscription.remove_consumer(consumer)
        await topic.unsubscribe(subscription.name)
        return web.Response(status=204)

    async def clear_backlog(self, request: web.Request) -> web.Response:
        """Everything stored so far counts as acknowledged; consumers reconnect from the end."""
        topic, subscription = await self._subscription(request)
        last = topic.ledger.last_confirmed_entry
        if last is not None:
            await subscription.seek(topic.ledger.next_position(last))
        return web.Response(status=204)

    async def reset_cursor(self, request: web.Request) -> web.Response:
        """Move the subscription to the first message published at or after ``timestamp`` (ms)."""
        topic, subscription = await self._subscription(request)
        try:
            at_ms = int(request.match_info["timestamp"])
        except ValueError:
            return _error(
                412,
                f"timestamp must be milliseconds since the epoch, not {request.match_info['timestamp']!r}",
            )
        await subscription.seek(await topic.position_published_since(at_ms))
        return web.Response(status=204)

    async def _subscription(self, request: web.Request) -> tuple[Topic, Subscription]:
        topic = await self._served(request)
        subscription = topic.subscriptions.get(request.match_info["subscription"])
        if subscription is None or not subscription.durable:
            raise NamespaceError(f"no subscription {request.match_info['subscription']} on {topic.name}", 404)
        return topic, subscription

    async def topic_bundle(self, request: web.Request) -> web.Response:
        _, bundle = await self._bundles.bundle_of(self._topic(request))
        return web.json_response(bundle.name)

    async def unload_topic(self, request: web.Request) -> web.Response:
        name = self._topic(request)
        namespace, bundle = await self._bundles.bundle_of(name)
        await self._forward_to_owner(request, namespace, bundle)
        topic = self._topics.get(str(name))
        if topic is not None:
            await self._topics.evict([topic])
        return web.Response(status=204)

    # -- brokers --------------------------------------------------------------------------------
    async def brokers(self, request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        found = [b.broker_id for b in await self._bundles.brokers() if b.cluster == cluster]
        if not found and cluster not in await self._namespaces.clusters():
            return _error(404, f"cluster {cluster} does not exist")
        return web.json_response(sorted(found))

    async def leader(self, request: web.Request) -> web.Response:
        leader = await self._deps.leader()
        if leader is None:
            return _error(404, "no leader broker elected yet")
        info = next((b for b in await self._bundles.brokers() if b.broker_id == leader), None)
        return web.json_response({"brokerId": leader, "serviceUrl": info.web_service_url if info else None})

    async def lookup(self, request: web.Request) -> web.Response:
        url, _ = await self._bundles.lookup(str(self._topic(request)))
        owner = next((b for b in await self._bundles.brokers() if b.service_url == url), None)
        # Pulsar's LookupData: the official clients need every field, TLS ones empty without TLS
        # (the C++ client refuses the answer without brokerUrlTls, and the Python client crashed).
        return web.json_response(
            {
                "brokerUrl": url,
                "brokerUrlTls": "",
                "httpUrl": owner.web_service_url if owner else "",
                "httpUrlTls": "",
                "nativeUrl": url,
            }
        )

    # -- partitioned topics (broker/partitions.py) ------------------------------------------------
    async def partitions(self, request: web.Request) -> web.Response:
        """Partitioned-topic metadata (HTTP lookups ask it first); 0 for a plain topic."""
        return web.json_response(
            {"partitions": await self._deps.partitioned.partitions(str(self._topic(request)))}
        )

    async def create_partitioned(self, request: web.Request) -> web.Response:
        await self._namespaces.policies(self._ns(request))  # 404 for a namespace that does not exist
        await self._deps.partitioned.create(str(self._topic(request)), await request.json())
        return web.Response(status=204)

    async def update_partitioned(self, request: web.Request) -> web.Response:
        await self._deps.partitioned.update(str(self._topic(request)), await request.json())
        return web.Response(status=204)

    async def delete_partitioned(self, request: web.Request) -> web.Response:
        await self._deps.partitioned.delete(str(self._topic(request)))
        return web.Response(status=204)

    async def partitioned_topics(self, request: web.Request) -> web.Response:
        await self._namespaces.policies(self._ns(request))
        return web.json_response(await self._deps.partitioned.list(self._ns(request)))


def _type_name(sub_type: int) -> str:
    return str(SubType.Name(sub_type))
