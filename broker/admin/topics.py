"""The admin REST API's topic level, as Pulsar's ``/admin/v2/persistent/…`` answers it: topics
(list, create, delete, terminate, last message id, stats, unload), partitioned topics, and the
HTTP lookup the official clients use with an ``http://`` service URL."""

from __future__ import annotations

from aiohttp import web

from magnetar.broker.admin.http import (
    DOMAIN,
    AdminDeps,
    Owners,
    domain_of,
    error,
    json_object,
    listener_of,
    namespace_of,
    query_flag,
    topic_of,
)
from magnetar.broker.admin.messages import message_id
from magnetar.broker.consumer import SubType
from magnetar.broker.non_persistent.topic import NonPersistentTopic
from magnetar.broker.schemas.admission import schema_id
from magnetar.broker.topic import Topic, TopicNotAllowedError


class TopicAdminApi:
    def __init__(self, deps: AdminDeps, owners: Owners) -> None:
        self._deps = deps
        self._owners = owners
        self._topics = deps.topics
        self._bundles = deps.bundles

    def install(self, app: web.Application) -> None:
        r = app.router
        ns = f"/admin/v2/{DOMAIN}/{{tenant}}/{{namespace}}"
        topic = f"{ns}/{{topic}}"
        r.add_get(ns, self.topics)
        r.add_get(f"{ns}/partitioned", self.partitioned_topics)
        r.add_put(topic, self.create_topic)
        r.add_delete(topic, self.delete_topic)
        r.add_post(f"{topic}/terminate", self.terminate)
        r.add_get(f"{topic}/lastMessageId", self.last_message_id)
        r.add_get(f"{topic}/stats", self.topic_stats)
        r.add_get(f"{topic}/internalStats", self.internal_stats)
        r.add_put(f"{topic}/unload", self.unload_topic)
        r.add_get(f"{topic}/bundle", self.topic_bundle)
        r.add_put(f"{topic}/compaction", self.compact)
        r.add_get(f"{topic}/compaction", self.compaction_status)
        r.add_get(f"{topic}/partitions", self.partitions)
        r.add_put(f"{topic}/partitions", self.create_partitioned)
        r.add_post(f"{topic}/partitions", self.update_partitioned)
        r.add_delete(f"{topic}/partitions", self.delete_partitioned)
        r.add_get(f"/lookup/v2/topic/{DOMAIN}/{{tenant}}/{{namespace}}/{{topic}}", self.lookup)

    # -- lifecycle ------------------------------------------------------------------------------
    async def topics(self, request: web.Request) -> web.Response:
        """Every topic of the namespace in the path's domain, partitions included (as Pulsar
        lists them): persistent ones stored, non-persistent ones loaded on this broker."""
        await self._deps.namespaces.policies(namespace_of(request))
        domains = (domain_of(request),)
        return web.json_response(await self._topics.topics_of_namespace(namespace_of(request), domains))

    async def _exists(self, name: str) -> bool:
        domain, path = name.split("://", 1)
        namespace = path.rsplit("/", 1)[0]
        listed = await self._topics.topics_of_namespace(namespace, (domain,))
        return self._topics.get(name) is not None or name in listed

    async def create_topic(self, request: web.Request) -> web.Response:
        """A non-partitioned topic (Pulsar's ``topics create``); 409 when it, or a partitioned
        topic of that name, exists."""
        name = str(topic_of(request))
        properties = await json_object(request, nullable=True)
        if properties:
            return error(412, "topic properties are not supported")
        await self._deps.namespaces.policies(namespace_of(request))  # 404 for an unknown namespace
        if await self._deps.partitioned.partitions(name) > 0:
            return error(409, f"{name} already exists as a partitioned topic")
        if await self._exists(name):
            return error(409, f"topic {name} already exists")
        await self._owners.topic(request)
        return web.Response(status=204)

    async def delete_topic(self, request: web.Request) -> web.Response:
        """Pulsar's ``topics delete``: refused (412) while producers or consumers are connected
        unless ``force``, which disconnects them; the topic's data is deleted for good."""
        name = str(topic_of(request))
        if await self._deps.partitioned.partitions(name) > 0:
            return error(409, f"{name} is a partitioned topic: delete it with …/partitions")
        if not await self._exists(name):
            return error(404, f"topic {name} does not exist")
        topic = await self._owners.topic(request)
        if (topic.producers or topic.consumers()) and not query_flag(request, "force"):
            return error(412, f"topic {name} has active producers or consumers (force=true disconnects them)")
        await self._topics.delete(topic)
        await self._deps.policies.store.delete(name)
        if topic.name.partition_index < 0:  # partitions share their topic's schema
            await self._deps.schemas.registry.remove(schema_id(name))
        return web.Response(status=204)

    async def terminate(self, request: web.Request) -> web.Response:
        """No more messages may be published (producers get TopicTerminated); the last one's id."""
        topic = await self._owners.topic(request)
        last = await topic.terminate()
        return web.json_response(message_id(last, topic.name.partition_index))

    async def last_message_id(self, request: web.Request) -> web.Response:
        topic = await self._owners.topic(request)
        last = await topic.last_dispatchable_position() or topic.ledger.before_first()
        return web.json_response(message_id(last, topic.name.partition_index))

    async def unload_topic(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        namespace, bundle = await self._bundles.bundle_of(name)
        await self._owners.forward(request, namespace, bundle)
        topic = self._topics.get(str(name))
        if topic is not None:
            await self._topics.evict([topic])
        return web.Response(status=204)

    async def topic_bundle(self, request: web.Request) -> web.Response:
        _, bundle = await self._bundles.bundle_of(topic_of(request))
        return web.json_response(bundle.name)

    # -- compaction -----------------------------------------------------------------------------
    async def compact(self, request: web.Request) -> web.Response:
        """Pulsar's ``topics compact``: starts compacting; ``compaction-status`` says how it went."""
        topic = await self._owners.topic(request)
        if not topic.name.is_persistent:
            raise TopicNotAllowedError(f"{topic.name}: only persistent topics can be compacted")
        self._deps.compactions.start(str(topic.name), topic.ledger)
        return web.Response(status=204)

    async def compaction_status(self, request: web.Request) -> web.Response:
        topic = await self._owners.topic(request)
        return web.json_response(self._deps.compactions.status(str(topic.name)))

    # -- stats ----------------------------------------------------------------------------------
    async def topic_stats(self, request: web.Request) -> web.Response:
        topic = await self._owners.topic(request)
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
                    {"producerName": p.name, "accessMode": p.access_mode, "msgInCounter": p.messages_in}
                    for p in topic.producers.values()
                ],
                "subscriptions": _subscription_stats(topic),
                "topicEpoch": topic.access.epoch,
                **_drops(topic),
            }
        )

    async def internal_stats(self, request: web.Request) -> web.Response:
        topic = await self._owners.topic(request)
        ledger = topic.ledger
        last = ledger.last_confirmed_entry
        return web.json_response(
            {
                "entriesAddedCounter": ledger.entries_added,
                "numberOfEntries": ledger.number_of_entries,
                "totalSize": ledger.total_size,
                "lastConfirmedEntry": str(last) if last else "-1:-1",
                "state": "Terminated" if ledger.is_terminated else "LedgerOpened",
                "ledgers": [
                    {"ledgerId": i.ledger_id, "entries": i.entries, "size": i.size} for i in ledger.ledgers
                ],
                "cursors": {
                    name: {
                        "markDeletePosition": str(c.mark_delete_position),
                        "readPosition": str(c.read_position),
                        "individuallyDeletedMessages": str([str(p) for p in c.individually_deleted]),
                        "cursorLedger": c.cursor_ledger,
                    }
                    for name, c in ledger.cursors.items()
                },
            }
        )

    # -- HTTP lookups ---------------------------------------------------------------------------
    async def lookup(self, request: web.Request) -> web.Response:
        authoritative = query_flag(request, "authoritative")
        listener = listener_of(request, self._deps.listener_at)
        urls, redirect = await self._bundles.lookup(
            str(topic_of(request)), authoritative=authoritative, listener=listener
        )
        if redirect and urls.web_url(secure=request.secure):
            # As Pulsar's: the broker chosen for an unowned bundle takes it only when asked itself
            # (authoritatively), so the client is sent there; the official clients follow a 307.
            # A client that asked over https:// is sent to the owner's https:// port.
            url = urls.web_url(secure=request.secure)
            raise web.HTTPTemporaryRedirect(f"{url}{request.path}?authoritative=true")
        # Pulsar's LookupData: the official clients need every field, TLS ones empty without TLS
        # (the C++ client refuses the answer without brokerUrlTls, and the Python client crashed).
        # The admin URLs come with the owner's record, not from the list of registered brokers,
        # which a broker that has just joined may not be in yet.
        return web.json_response(
            {
                "brokerUrl": urls.url,
                "brokerUrlTls": urls.url_tls,
                "httpUrl": urls.http_url,
                "httpUrlTls": urls.http_url_tls,
                "nativeUrl": urls.url,
            }
        )

    # -- partitioned topics (broker/partitions.py) ----------------------------------------------
    async def partitions(self, request: web.Request) -> web.Response:
        """Partitioned-topic metadata (HTTP lookups ask it first); 0 for a plain topic."""
        name = str(topic_of(request))
        if query_flag(request, "checkAllowAutoCreation"):  # a client's HTTP lookup: may create it
            count = await self._deps.auto_creation.partitions(name)
        else:
            count = await self._deps.partitioned.partitions(name)
        return web.json_response({"partitions": count})

    async def create_partitioned(self, request: web.Request) -> web.Response:
        name = str(topic_of(request))
        await self._deps.namespaces.policies(namespace_of(request))  # 404 for an unknown namespace
        if await self._exists(name):
            return error(409, f"{name} already exists as a non-partitioned topic")
        body = await request.json()
        if isinstance(body, dict):  # PartitionedTopicMetadata, as newer admin clients send it
            if body.get("properties"):
                return error(412, "topic properties are not supported")
            body = body.get("partitions")
        await self._deps.partitioned.create(name, body)
        return web.Response(status=204)

    async def update_partitioned(self, request: web.Request) -> web.Response:
        await self._deps.partitioned.update(str(topic_of(request)), await request.json())
        return web.Response(status=204)

    async def delete_partitioned(self, request: web.Request) -> web.Response:
        """The partitioned topic and every partition's data (``force`` disconnects clients)."""
        name = str(topic_of(request))
        count = await self._deps.partitioned.partitions(name)
        if count == 0:
            return error(404, f"partitioned topic {name} does not exist")
        for index in range(count):
            await self._owners.delete_topic(f"{name}-partition-{index}", force=query_flag(request, "force"))
        await self._deps.partitioned.delete(name)
        await self._deps.policies.store.delete(name)
        await self._deps.schemas.registry.remove(schema_id(name))
        return web.Response(status=204)

    async def partitioned_topics(self, request: web.Request) -> web.Response:
        await self._deps.namespaces.policies(namespace_of(request))
        return web.json_response(await self._deps.partitioned.list(namespace_of(request), domain_of(request)))


def _drops(topic: Topic) -> dict[str, int]:
    """A non-persistent topic's messages dropped for subscriptions that could not take them."""
    if isinstance(topic, NonPersistentTopic):
        return {"msgDropCounter": topic.messages_dropped}
    return {}


def _subscription_stats(topic: Topic) -> dict[str, object]:
    drops = topic.drops if isinstance(topic, NonPersistentTopic) else None
    return {
        name: {
            **({"msgDropCounter": drops.get(name, 0)} if drops is not None else {}),
            "msgBacklog": sub.backlog,
            "type": str(SubType.Name(sub.sub_type)),
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
    }
