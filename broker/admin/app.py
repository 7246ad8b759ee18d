"""The admin REST API's namespace level: clusters, tenants, namespaces, bundles and brokers, as
Pulsar's ``/admin/v2`` answers them. Topics and subscriptions are in topics.py and
subscriptions.py; what all of them share (errors, redirects to owners) in http.py.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from pydantic import ValidationError

from magnetar.admin.client import AdminError, AsyncAdminClient
from magnetar.broker.admin.access import access_checks
from magnetar.broker.admin.http import (
    ROLE,
    AdminDeps,
    Handler,
    Owners,
    cluster_names,
    error,
    errors,
    json_object,
    namespace_of,
    probe,
    query_flag,
)
from magnetar.broker.admin.namespace_body import apply_body
from magnetar.broker.admin.permissions import PermissionAdminApi
from magnetar.broker.admin.policies import PolicyAdminApi
from magnetar.broker.admin.schemas import SchemaAdminApi
from magnetar.broker.admin.subscriptions import SubscriptionAdminApi
from magnetar.broker.admin.topics import TopicAdminApi
from magnetar.broker.namespace import Bundle, NamespaceError, NamespacePolicies, Namespaces, even_boundaries
from magnetar.broker.policies.data import AutoTopicCreationOverride
from magnetar.common.authentication.providers import AuthenticationFailed
from magnetar.common.tls import peer_common_name

__all__ = ["AdminApi", "AdminDeps", "errors"]


class AdminApi:
    def __init__(self, deps: AdminDeps) -> None:
        self._deps = deps
        self._bundles = deps.bundles
        self._topics = deps.topics
        self._owners = Owners(deps.bundles, deps.topics, deps.broker_credentials, deps.listener_at)

    def install(self, app: web.Application) -> None:
        app.middlewares.append(errors)
        app.middlewares.append(self._authenticated)
        if self._deps.authorization is not None:
            app.middlewares.append(access_checks(self._deps.authorization))
        app.middlewares.append(self._store_reachable)
        r = app.router
        r.add_get("/admin/v2/clusters", self.clusters)
        r.add_get("/admin/v2/clusters/{cluster}", self.cluster)
        r.add_put("/admin/v2/clusters/{cluster}", self.create_cluster)
        r.add_get("/admin/v2/tenants", self.tenants)
        r.add_put("/admin/v2/tenants/{tenant}", self.create_tenant)
        r.add_post("/admin/v2/tenants/{tenant}", self.update_tenant)
        r.add_get("/admin/v2/tenants/{tenant}", self.tenant)
        r.add_delete("/admin/v2/tenants/{tenant}", self.delete_tenant)
        ns = "/admin/v2/namespaces/{tenant}/{namespace}"
        r.add_get("/admin/v2/namespaces/{tenant}", self.namespaces)
        r.add_put(ns, self.create_namespace)
        r.add_get(ns, self.policies)
        r.add_delete(ns, self.delete_namespace)
        r.add_get(f"{ns}/replication", self.replication)
        r.add_post(f"{ns}/replication", self.set_replication)
        r.add_get(f"{ns}/deduplication", self.deduplication)
        r.add_post(f"{ns}/deduplication", self.set_deduplication)
        r.add_delete(f"{ns}/deduplication", self.remove_deduplication)
        r.add_get(f"{ns}/bundles", self.bundles)
        r.add_get(f"{ns}/autoTopicCreation", self.auto_topic_creation)
        r.add_post(f"{ns}/autoTopicCreation", self.set_auto_topic_creation)
        r.add_delete(f"{ns}/autoTopicCreation", self.remove_auto_topic_creation)
        r.add_post(f"{ns}/replicatedSubscriptionsSnapshotFrequency", self.set_snapshot_frequency)
        r.add_post(f"{ns}/replicatedSubscriptionsCarryAcks", self.set_carry_acks)
        r.add_put(f"{ns}/unload", self.unload_namespace)
        r.add_put(f"{ns}/{{bundle}}/unload", self.unload_bundle)
        r.add_put(f"{ns}/{{bundle}}/split", self.split_bundle)
        r.add_get("/admin/v2/brokers/leaderBroker", self.leader)
        r.add_get("/admin/v2/brokers/{cluster}", self.brokers)
        r.add_get("/admin/v2/broker-stats/event-loop", self.event_loop)
        TopicAdminApi(self._deps, self._owners).install(app)
        SubscriptionAdminApi(self._owners).install(app)
        PolicyAdminApi(self._deps).install(app)
        SchemaAdminApi(self._deps).install(app)
        PermissionAdminApi(self._deps).install(app)

    @web.middleware
    async def _authenticated(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Admin and lookup calls say who they are (``Authorization: Bearer <token>``) when
        authentication is on; the role is kept with the request. /metrics stays open, as Pulsar's
        does by default."""
        if request.path.startswith(("/admin/", "/lookup/")):
            transport = request.transport
            ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
            try:
                # Off the loop: a basic provider's bcrypt check takes tens of milliseconds.
                role = await asyncio.to_thread(
                    self._deps.authentication.authenticate_http,
                    request.headers.get("Authorization"),
                    peer_common_name(ssl_object),
                )
            except AuthenticationFailed as exc:
                return error(401, f"authentication failed: {exc}")
            request[ROLE] = role
        return await handler(request)

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
        body = await json_object(request)
        service_url, broker_url = body.get("serviceUrl", ""), body.get("brokerServiceUrl", "")
        if not isinstance(broker_url, str) or not broker_url.startswith("pulsar://"):
            return error(412, f"brokerServiceUrl must be a pulsar://host:port URL, not {broker_url!r}")
        broker_url_tls = body.get("brokerServiceUrlTls") or ""
        if not isinstance(broker_url_tls, str) or (
            broker_url_tls and not broker_url_tls.startswith("pulsar+ssl://")
        ):
            return error(
                412, f"brokerServiceUrlTls must be a pulsar+ssl://host:port URL, not {broker_url_tls!r}"
            )
        if name in await self._namespaces.clusters():
            return error(409, f"cluster {name} already exists")
        await self._namespaces.set_cluster(
            name,
            str(service_url),
            broker_url,
            str(body.get("listenerName", "")),
            service_url_tls=str(body.get("serviceUrlTls") or ""),
            broker_service_url_tls=broker_url_tls,
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
        body = await json_object(request)
        clusters = cluster_names(body, "allowedClusters", [self._deps.cluster_name])
        await self._namespaces.create_tenant(
            request.match_info["tenant"], clusters, admin_roles=_admin_roles(body) or []
        )
        return web.Response(status=204)

    async def update_tenant(self, request: web.Request) -> web.Response:
        body = await json_object(request)
        clusters = cluster_names(body, "allowedClusters", [self._deps.cluster_name])
        await self._check_clusters(clusters)
        await self._namespaces.update_tenant(request.match_info["tenant"], clusters, _admin_roles(body))
        return web.Response(status=204)

    async def tenant(self, request: web.Request) -> web.Response:
        return web.json_response(await self._namespaces.tenant(request.match_info["tenant"]))

    async def delete_tenant(self, request: web.Request) -> web.Response:
        await self._namespaces.delete_tenant(request.match_info["tenant"])
        return web.Response(status=204)

    # -- namespaces -----------------------------------------------------------------------------
    async def namespaces(self, request: web.Request) -> web.Response:
        return web.json_response(await self._namespaces.namespaces(request.match_info["tenant"]))

    async def create_namespace(self, request: web.Request) -> web.Response:
        body = await json_object(request)
        policies = NamespacePolicies()
        bundles = body.get("bundles", {}).get("numBundles") if isinstance(body.get("bundles"), dict) else None
        if bundles is not None:
            if not isinstance(bundles, int) or not 1 <= bundles <= 1024:
                return error(412, f"numBundles must be an integer in 1..1024, not {bundles!r}")
            policies.boundaries = even_boundaries(bundles)
        key = "replication_clusters" if "replication_clusters" in body else "replicationClusters"
        policies.replication_clusters = cluster_names(body, key, []) or [self._deps.cluster_name]
        await self._check_clusters(policies.replication_clusters)
        apply_body(policies, body, self._deps.cluster_name)
        await self._namespaces.create(namespace_of(request), policies)
        return web.Response(status=204)

    async def policies(self, request: web.Request) -> web.Response:
        policies = await self._namespaces.policies(namespace_of(request))
        doc = policies.model_dump()
        doc["bundles"] = {"boundaries": [f"0x{b:08x}" for b in policies.boundaries[:-1]] + ["0xffffffff"],
                          "numBundles": len(policies.bundles())}  # fmt: skip
        return web.json_response(doc)

    async def delete_namespace(self, request: web.Request) -> web.Response:
        """Pulsar's rule: a namespace that holds topics is not deleted (409) unless ``force``,
        which deletes them with it, for good: a namespace created again starts empty."""
        namespace = namespace_of(request)
        await self._namespaces.policies(namespace)  # 404 for a namespace that does not exist
        partitioned = await self._deps.partitioned.list(namespace)
        topics = await self._topics.topics_of_namespace(namespace)
        if (topics or partitioned) and not query_flag(request, "force"):
            held = partitioned + topics
            shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            return error(409, f"cannot delete non-empty namespace {namespace}: it holds {shown}")
        for name in partitioned:
            await self._deps.partitioned.delete(name)
        for name in topics:
            await self._owners.delete_topic(name, force=True)
        await self._deps.policies.store.delete_namespace(namespace)
        await self._namespaces.delete(namespace)
        return web.Response(status=204)

    async def replication(self, request: web.Request) -> web.Response:
        policies = await self._namespaces.policies(namespace_of(request))
        return web.json_response(policies.replication_clusters)

    async def set_replication(self, request: web.Request) -> web.Response:
        clusters = await request.json()
        if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters):
            return error(400, "expected a JSON list of cluster names")
        if not clusters:
            return error(412, "a namespace needs at least one cluster")
        await self._check_clusters(clusters)
        await self._namespaces.update(namespace_of(request), {"replication_clusters": clusters})
        return web.Response(status=204)

    async def deduplication(self, request: web.Request) -> web.Response:
        """The namespace's message deduplication (null: the broker's ``broker_deduplication_enabled``)."""
        policies = await self._namespaces.policies(namespace_of(request))
        return web.json_response(policies.deduplication_enabled)

    async def set_deduplication(self, request: web.Request) -> web.Response:
        """Pulsar's ``namespaces set-deduplication``: applies to topics loaded from now on (a
        topic already loaded keeps its setting until it is unloaded)."""
        enabled = await request.json()
        if not isinstance(enabled, bool):
            return error(412, f"expected true or false, not {enabled!r}")
        await self._namespaces.update(namespace_of(request), {"deduplication_enabled": enabled})
        return web.Response(status=204)

    async def remove_deduplication(self, request: web.Request) -> web.Response:
        await self._namespaces.update(namespace_of(request), {"deduplication_enabled": None})
        return web.Response(status=204)

    async def auto_topic_creation(self, request: web.Request) -> web.Response:
        override = (await self._namespaces.policies(namespace_of(request))).auto_topic_creation
        return web.json_response(override.model_dump() if override is not None else None)

    async def set_auto_topic_creation(self, request: web.Request) -> web.Response:
        """Pulsar's ``namespaces set-auto-topic-creation``: the namespace's own rule."""
        try:
            override = AutoTopicCreationOverride.model_validate(await json_object(request))
        except ValidationError as exc:
            return error(412, f"invalid autoTopicCreationOverride: {exc.errors()[0]['msg']}")
        await self._namespaces.update(namespace_of(request), {"auto_topic_creation": override.model_dump()})
        return web.Response(status=204)

    async def remove_auto_topic_creation(self, request: web.Request) -> web.Response:
        await self._namespaces.update(namespace_of(request), {"auto_topic_creation": None})
        return web.Response(status=204)

    async def set_snapshot_frequency(self, request: web.Request) -> web.Response:
        """PIP-33 snapshot frequency of the namespace's topics (milliseconds, at least 50;
        null: the broker's default)."""
        millis = await request.json()
        if millis is not None and (not isinstance(millis, int) or millis < 50):
            return error(412, f"the snapshot frequency is at least 50 ms, not {millis!r}")
        await self._namespaces.update(
            namespace_of(request), {"replicated_subscriptions_snapshot_frequency_millis": millis}
        )
        return web.Response(status=204)

    async def set_carry_acks(self, request: web.Request) -> web.Response:
        """Beyond PIP-33 (a) for the namespace (true/false; null: the broker's setting)."""
        carry = await request.json()
        if carry is not None and not isinstance(carry, bool):
            return error(412, f"expected true, false or null, not {carry!r}")
        await self._namespaces.update(namespace_of(request), {"replicated_subscriptions_carry_acks": carry})
        return web.Response(status=204)

    async def bundles(self, request: web.Request) -> web.Response:
        policies = await self._namespaces.policies(namespace_of(request))
        boundaries = [f"0x{b:08x}" for b in policies.boundaries[:-1]] + ["0xffffffff"]
        return web.json_response({"boundaries": boundaries, "numBundles": len(policies.bundles())})

    async def unload_namespace(self, request: web.Request) -> web.Response:
        """Every bundle unloaded side by side, by its owner (as Pulsar waits for all of them):
        one after another, the clients of the first bundles reloaded their topics while the
        last ones were still closing theirs, and a namespace of 5,000 topics in 16 bundles
        took 27 s to unload."""
        namespace = namespace_of(request)
        policies = await self._namespaces.policies(namespace)
        results = await asyncio.gather(
            *(self._unload_bundle_of(namespace, bundle) for bundle in policies.bundles()),
            return_exceptions=True,
        )
        failed = next((r for r in results if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed
        return web.Response(status=204)

    async def _unload_bundle_of(self, namespace: str, bundle: Bundle) -> None:
        owner = await self._bundles.owner(namespace, bundle)
        if owner is not None and owner.broker_id == self._bundles.broker_id:
            await self._bundles.unload(namespace, bundle)
        elif owner is not None:
            path = f"/admin/v2/namespaces/{namespace}/{bundle.name}/unload"
            try:
                client = AsyncAdminClient(owner.web_service_url, credentials=self._deps.broker_credentials)
                await client.request("PUT", path)
            except AdminError as exc:
                raise NamespaceError(f"{owner.broker_id}: {exc}", 502) from None

    async def _owned_bundle(self, request: web.Request) -> tuple[str, Bundle]:
        namespace = namespace_of(request)
        bundle = Bundle.parse(request.match_info["bundle"])
        if bundle not in (await self._namespaces.policies(namespace)).bundles():
            raise NamespaceError(f"bundle {bundle.name} is not a bundle of {namespace}")
        return namespace, bundle

    async def unload_bundle(self, request: web.Request) -> web.Response:
        namespace, bundle = await self._owned_bundle(request)
        await self._owners.forward(request, namespace, bundle)
        destination = request.query.get("destinationBroker")
        if destination:
            topics = await self._bundles.transfer(namespace, bundle, destination)
        else:
            topics = await self._bundles.unload(namespace, bundle)
        return web.json_response({"bundle": bundle.name, "topics": topics, "destinationBroker": destination})

    async def split_bundle(self, request: web.Request) -> web.Response:
        """Pulsar's split-bundle: the topics stay where they are, served throughout; with
        ``unload=true`` both halves are unloaded afterwards, so they may land elsewhere."""
        namespace, bundle = await self._owned_bundle(request)
        await self._owners.forward(request, namespace, bundle)
        halves = await self._bundles.split(namespace, bundle, self._namespaces.split)
        if request.query.get("unload", "false").lower() == "true":
            for half in halves:
                await self._bundles.unload(namespace, half)
        return web.json_response({"bundles": [half.name for half in halves]})

    # -- brokers --------------------------------------------------------------------------------
    async def brokers(self, request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        found = [b.broker_id for b in await self._bundles.brokers() if b.cluster == cluster]
        if not found and cluster not in await self._namespaces.clusters():
            return error(404, f"cluster {cluster} does not exist")
        return web.json_response(sorted(found))

    async def leader(self, request: web.Request) -> web.Response:
        leader = await self._deps.leader()
        if leader is None:
            return error(404, "no leader broker elected yet")
        info = next((b for b in await self._bundles.brokers() if b.broker_id == leader), None)
        return web.json_response({"brokerId": leader, "serviceUrl": info.web_service_url if info else None})

    async def event_loop(self, request: web.Request) -> web.Response:
        """What the broker's event loop holds: its tasks (by coroutine) and timers. What a topic
        costs at rest shows here, beside the RSS."""
        tasks = asyncio.all_tasks()
        by_coroutine: dict[str, int] = {}
        for task in tasks:
            coroutine = task.get_coro()
            name = getattr(coroutine, "__qualname__", type(coroutine).__name__)
            by_coroutine[name] = by_coroutine.get(name, 0) + 1
        # asyncio's own loop keeps its timers in ``_scheduled``; uvloop does not show them (None)
        scheduled = getattr(asyncio.get_running_loop(), "_scheduled", None)
        timers = len(scheduled) if scheduled is not None else None
        ranked = dict(sorted(by_coroutine.items(), key=lambda kv: -kv[1]))
        return web.json_response({"tasks": len(tasks), "timers": timers, "tasksByCoroutine": ranked})


def _admin_roles(body: dict[str, object]) -> list[str] | None:
    """A TenantInfo's adminRoles (None: not given; the Go admin client sends null)."""
    roles = body.get("adminRoles")
    if roles is None:
        return None
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        raise NamespaceError(f"adminRoles must be a list of role names, not {roles!r}", 400)
    return roles
