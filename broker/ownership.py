"""Bundle ownership and the broker registry, in the region's metadata store.

    /loadbalance/brokers/<broker id>         ephemeral, JSON load report of a live broker
    /namespace/<tenant>/<ns>/<bundle name>   ephemeral, JSON owner of a bundle

Read-only brokers (PIP-63) keep the same layout under their own roots, independent of the
writable owners:

    /loadbalance/read-only-brokers/<broker id>
    /namespace-read-only/<tenant>/<ns>/<bundle name>

An ownership node dies with its broker's session, so a crashed broker's bundles become free and
the next lookup places them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import asdict, dataclass, field

from magnetar.broker.namespace import Bundle
from magnetar.common.metadata import (
    BadVersionError,
    MetadataError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
)

log = logging.getLogger(__name__)

BROKERS = "/loadbalance/brokers"
LEADER = "/loadbalance/leader"
BUNDLES = "/namespace"
READ_ONLY_BROKERS = "/loadbalance/read-only-brokers"
READ_ONLY_BUNDLES = "/namespace-read-only"
#: a transfer's destination, named while the bundle is between its two owners (see ``handover``)
HANDOVERS = "/loadbalance/handovers"
READ_ONLY_HANDOVERS = "/loadbalance/read-only-handovers"


@dataclass
class BrokerInfo:
    broker_id: str
    service_url: str
    web_service_url: str
    cluster: str
    bundles: int = 0
    topics: int = 0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    connections: int = 0
    #: host:port of the broker RPCs (rpc_server.py): transfers between brokers, and on writable
    #: brokers the PIP-63 cursor RPCs (read-only brokers forward cursor updates there)
    cursor_rpc_address: str = ""
    extra: dict[str, float] = field(default_factory=dict)
    #: the broker's addresses by listener name (advertised_listeners)
    listeners: dict[str, str] = field(default_factory=dict)
    #: pulsar+ssl:// and https:// URLs, when the broker has TLS ports
    service_url_tls: str = ""
    web_service_url_tls: str = ""
    #: the broker's pulsar+ssl:// addresses by listener name (advertised_listeners)
    listeners_tls: dict[str, str] = field(default_factory=dict)
    #: the broker's http:// and https:// addresses by listener name (admin redirects)
    web_listeners: dict[str, str] = field(default_factory=dict)
    web_listeners_tls: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, data: bytes) -> BrokerInfo:
        return cls(**json.loads(data))


@dataclass(frozen=True)
class Owner:
    broker_id: str
    service_url: str
    web_service_url: str
    #: (listener name, pulsar URL) pairs: the owner's advertised listeners
    listeners: tuple[tuple[str, str], ...] = ()
    service_url_tls: str = ""
    web_service_url_tls: str = ""
    #: (listener name, pulsar+ssl URL) pairs
    listeners_tls: tuple[tuple[str, str], ...] = ()
    #: (listener name, http:// URL) and (listener name, https:// URL) pairs
    web_listeners: tuple[tuple[str, str], ...] = ()
    web_listeners_tls: tuple[tuple[str, str], ...] = ()

    def encode(self) -> bytes:
        # Pulsar's NamespaceEphemeralData field names
        return json.dumps(
            {
                "brokerId": self.broker_id,
                "nativeUrl": self.service_url,
                "nativeUrlTls": self.service_url_tls,
                "httpUrl": self.web_service_url,
                "httpUrlTls": self.web_service_url_tls,
                "advertisedListeners": _advertised(
                    self.listeners, self.listeners_tls, self.web_listeners, self.web_listeners_tls
                ),
            }
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> Owner:
        doc = json.loads(data)
        advertised: dict[str, dict[str, str]] = doc.get("advertisedListeners", {})

        def pairs(key: str) -> tuple[tuple[str, str], ...]:
            return tuple(sorted((n, v[key]) for n, v in advertised.items() if v.get(key)))

        return cls(
            doc["brokerId"],
            doc["nativeUrl"],
            doc["httpUrl"],
            pairs("brokerServiceUrl"),
            doc.get("nativeUrlTls", ""),
            doc.get("httpUrlTls", ""),
            pairs("brokerServiceUrlTls"),
            pairs(_WEB_URL),
            pairs(_WEB_URL_TLS),
        )


#: not in Pulsar's AdvertisedListener (which readers of the record ignore): a listener's admin URLs
_WEB_URL, _WEB_URL_TLS = "webServiceUrl", "webServiceUrlTls"


def _advertised(
    listeners: tuple[tuple[str, str], ...],
    listeners_tls: tuple[tuple[str, str], ...],
    web: tuple[tuple[str, str], ...],
    web_tls: tuple[tuple[str, str], ...],
) -> dict[str, dict[str, str]]:
    """Pulsar's ``advertisedListeners``: {name: {brokerServiceUrl, brokerServiceUrlTls}}, and
    the listener's web service URLs."""
    found: dict[str, dict[str, str]] = {}
    tables = (
        ("brokerServiceUrl", listeners),
        ("brokerServiceUrlTls", listeners_tls),
        (_WEB_URL, web),
        (_WEB_URL_TLS, web_tls),
    )
    for key, pairs in tables:
        for name, url in pairs:
            found.setdefault(name, {})[key] = url
    return found


@dataclass(frozen=True)
class LookupUrls:
    """Where a lookup sends a client: pulsar:// (or the named listener's), and pulsar+ssl://
    when the broker has a TLS port (clients on pulsar+ssl:// take that one)."""

    url: str
    url_tls: str = ""
    #: the same broker's admin URLs (http://, https://), for HTTP lookups' httpUrl and httpUrlTls
    http_url: str = ""
    http_url_tls: str = ""

    def web_url(self, *, secure: bool) -> str:
        """Where an HTTP request about the topic goes: https:// for one that came over TLS (when
        the broker has it), else http://."""
        return _chosen_web_url(self.http_url, self.http_url_tls, secure=secure)


class UnknownListenerError(LookupError):
    """A lookup named a listener the owner does not advertise."""


def lookup_urls(broker: Owner | BrokerInfo, listener: str | None) -> LookupUrls:
    """The URLs a lookup answers with: the named listener's, else the broker's service URLs;
    and its admin URLs, the listener's where it advertises some."""
    http, http_tls = _web_urls(broker, listener)
    if not listener:
        return LookupUrls(broker.service_url, broker.service_url_tls, http, http_tls)
    url, url_tls = dict(broker.listeners).get(listener, ""), dict(broker.listeners_tls).get(listener, "")
    if not (url or url_tls):
        raise UnknownListenerError(f"broker {broker.broker_id} advertises no listener named {listener!r}")
    return LookupUrls(url, url_tls, http, http_tls)


def _web_urls(broker: Owner | BrokerInfo, listener: str | None) -> tuple[str, str]:
    """(http://, https://) of ``broker``: the listener's when it advertises web URLs, else its
    default ones."""
    plain, tls = (
        dict(broker.web_listeners).get(listener or ""),
        dict(broker.web_listeners_tls).get(listener or ""),
    )
    if not (plain or tls):
        return broker.web_service_url, broker.web_service_url_tls
    return plain or "", tls or ""


def web_url(broker: Owner | BrokerInfo, listener: str | None, *, secure: bool) -> str:
    """Where an admin call about what ``broker`` owns is redirected: its https:// URL for a
    request that came over TLS (when it has one), on the request's listener when that listener
    advertises web URLs, else its default ones."""
    plain, tls = _web_urls(broker, listener)
    return _chosen_web_url(plain, tls, secure=secure)


def _chosen_web_url(plain: str, tls: str, *, secure: bool) -> str:
    """https:// for a request that came over TLS (when there is one), else http://."""
    return (tls if secure and tls else plain) or tls


class NotServedError(Exception):
    """The topic's bundle is owned by another broker (or by none yet): look it up again."""


def bundle_path(namespace: str, bundle: Bundle, root: str = BUNDLES) -> str:
    return f"{root}/{namespace}/{bundle.name}"


class Ownership:
    """The broker registry and bundle ownership of one pool: the writable brokers (default
    roots) or the read-only pool (``READ_ONLY_BROKERS``, ``READ_ONLY_BUNDLES``)."""

    def __init__(
        self,
        store: MetadataStore,
        me: BrokerInfo,
        *,
        brokers_root: str = BROKERS,
        bundles_root: str = BUNDLES,
        handovers_root: str = HANDOVERS,
    ) -> None:
        self._store = store
        self.me = me
        self.owned: set[tuple[str, Bundle]] = set()
        #: acquisitions under way: their node may already be visible to a lookup (which then
        #: sends clients here) before the bundle is in ``owned``
        self._acquiring: dict[tuple[str, Bundle], asyncio.Future[None]] = {}
        self._brokers = brokers_root
        self._bundles = bundles_root
        self._handovers = handovers_root
        self._leaving = False
        #: the background report after ownership changed, and whether another must follow it
        self._reporting: asyncio.Task[None] | None = None
        self._report_again = False

    @property
    def owner_record(self) -> Owner:
        listeners = tuple(sorted(self.me.listeners.items()))
        me = self.me
        return Owner(
            me.broker_id,
            me.service_url,
            me.web_service_url,
            listeners,
            me.service_url_tls,
            me.web_service_url_tls,
            tuple(sorted(me.listeners_tls.items())),
            tuple(sorted(me.web_listeners.items())),
            tuple(sorted(me.web_listeners_tls.items())),
        )

    @property
    def leaving(self) -> bool:
        """Set by ``unregister``: the broker is shutting down (or gone) and takes nothing new."""
        return self._leaving

    async def register(self) -> None:
        """Create the broker's ephemeral node (at start, and after a session expiry took it)."""
        path = f"{self._brokers}/{self.me.broker_id}"
        with contextlib.suppress(NoNodeError):
            await self._store.delete(path)  # a previous incarnation's node, not yet expired
        if self._leaving:  # checked right before the create: nothing can unregister in between
            return
        with contextlib.suppress(NodeExistsError):  # a concurrent register won
            await self._store.create(path, self.me.encode(), ephemeral=True)

    async def report(self) -> None:
        """Update the broker's node. Never an unconditional put: that would create a persistent
        node when the ephemeral one is gone, and a leaving (or dead) broker would stay listed
        and be given bundles. A missing node is created again only while the broker is not
        leaving (it went with an expired session)."""
        self.me.bundles = len(self.owned)
        if self._leaving:
            return
        path = f"{self._brokers}/{self.me.broker_id}"
        stat = await self._store.exists(path)
        if stat is None:
            await self.register()
            return
        with contextlib.suppress(NoNodeError, BadVersionError):  # unregistered or updated meanwhile
            await self._store.put(path, self.me.encode(), expected_version=stat.version)

    async def brokers(self) -> list[BrokerInfo]:
        try:
            names = await self._store.children(self._brokers)
        except NoNodeError:
            return []
        found = []
        for name in names:
            with contextlib.suppress(NoNodeError):
                found.append(BrokerInfo.decode((await self._store.get(f"{self._brokers}/{name}"))[0]))
        return found

    async def owner(self, namespace: str, bundle: Bundle) -> Owner | None:
        try:
            return Owner.decode((await self._store.get(bundle_path(namespace, bundle, self._bundles)))[0])
        except NoNodeError:
            return None

    async def acquired(self, namespace: str, bundle: Bundle) -> None:
        """Return once an acquisition of the bundle by this broker under way has ended."""
        pending = self._acquiring.get((namespace, bundle))
        if pending is not None:
            await asyncio.shield(pending)

    async def acquire(self, namespace: str, bundle: Bundle) -> Owner:
        """Take the bundle if it is free; returns whoever owns it afterwards. A leaving broker
        takes nothing (NotServedError): the bundle would only have to move again."""
        if self._leaving:
            raise NotServedError(f"broker {self.me.broker_id} is shutting down and takes no bundle")
        key = (namespace, bundle)
        pending = asyncio.get_running_loop().create_future()
        self._acquiring.setdefault(key, pending)
        try:
            return await self._acquire(namespace, bundle)
        finally:
            if self._acquiring.get(key) is pending:
                del self._acquiring[key]
            pending.set_result(None)

    async def _acquire(self, namespace: str, bundle: Bundle) -> Owner:
        try:
            await self._store.create(
                bundle_path(namespace, bundle, self._bundles), self.owner_record.encode(), ephemeral=True
            )
        except NodeExistsError:
            owner = await self.owner(namespace, bundle)
            if owner is not None:
                if owner.broker_id == self.me.broker_id:
                    self.owned.add((namespace, bundle))
                return owner
            return await self._acquire(namespace, bundle)
        self.owned.add((namespace, bundle))
        self._report_soon()
        return self.owner_record

    async def release(self, namespace: str, bundle: Bundle) -> None:
        self.owned.discard((namespace, bundle))
        owner = await self.owner(namespace, bundle)
        if owner is not None and owner.broker_id == self.me.broker_id:
            with contextlib.suppress(NoNodeError):
                await self._store.delete(bundle_path(namespace, bundle, self._bundles))
        self._report_soon()

    # -- transfers ----------------------------------------------------------------------------
    # Between the source's release and the destination's acquisition nobody owns the bundle, and
    # a lookup on any other broker (a client's, an HTTP lookup, a read-only broker's cursor call)
    # would place it anywhere, the source included: the transfer would end as an unload. As
    # Pulsar's bundle state channel records a transfer's destination while the bundle is being
    # released and assigned, the source names the destination in an ephemeral node (gone with
    # the source's session if it dies) that lookups of an unowned bundle follow.
    async def announce_handover(self, namespace: str, bundle: Bundle, destination: str) -> None:
        path = bundle_path(namespace, bundle, self._handovers)
        try:
            await self._store.create(path, destination.encode(), ephemeral=True)
        except NodeExistsError:
            await self._store.put(path, destination.encode())

    async def handover(self, namespace: str, bundle: Bundle) -> str | None:
        """The broker id a transfer under way hands the bundle to (None: no transfer)."""
        try:
            return (await self._store.get(bundle_path(namespace, bundle, self._handovers)))[0].decode()
        except NoNodeError:
            return None

    async def end_handover(self, namespace: str, bundle: Bundle) -> None:
        with contextlib.suppress(NoNodeError):
            await self._store.delete(bundle_path(namespace, bundle, self._handovers))

    def _report_soon(self) -> None:
        """Report the new bundle count in the background: a metadata write (synced to disk by
        ZooKeeper) is no part of taking or releasing a bundle, and was the last step of every
        handover. Reports coalesce: one runs at a time, and one more if the count changed."""
        if self._reporting is not None and not self._reporting.done():
            self._report_again = True
            return
        self._reporting = asyncio.get_running_loop().create_task(self._report_until_current())

    async def _report_until_current(self) -> None:
        self._report_again = True
        while self._report_again:
            self._report_again = False
            try:
                await self.report()
            except MetadataError as exc:  # the periodic report tries again
                log.info("bundle count not reported: %s", exc)
                return

    async def unregister(self) -> None:
        """Leave the registry for good: no report registers the broker again, so placement no
        longer picks it while it hands its bundles over (and after it is gone)."""
        self._leaving = True
        with contextlib.suppress(NoNodeError):
            await self._store.delete(f"{self._brokers}/{self.me.broker_id}")
