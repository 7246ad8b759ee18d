"""ZooKeeper backend through kazoo (``zk://host:port[,host:port]/chroot``).

kazoo runs its own threads and completes ``IAsyncResult``s there; ``_bridge`` turns each into
an asyncio future on the store's loop, so no kazoo call ever blocks the event loop. ZooKeeper
watches fire once; the store re-arms them after every event and after a new session, which
gives the persistent watches of the ``MetadataStore`` contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo import exceptions as kx
from kazoo.client import KazooClient, TransactionRequest
from kazoo.protocol.states import KazooState, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from magnetar.common.metadata import paths
from magnetar.common.metadata.election import StoreLeaderElection
from magnetar.common.metadata.kazoo_poll import Inline, PollingHandler
from magnetar.common.metadata.store import (
    BadVersionError,
    EventType,
    LeaderElection,
    MetadataError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionCallback,
    SessionExpiredError,
    SessionState,
    Stat,
    WatchCallback,
    WatchEvent,
)
from magnetar.common.metadata.watchers import Watchers
from magnetar.common.metadata.zk_batches import WriteBatches
from magnetar.common.repeated_logs import throttle

log = logging.getLogger(__name__)
T = TypeVar("T")

#: How long a read waits for kazoo's reconnection, or the session it opens after an expiry, before
#: failing its caller.
#: ZooKeeper's return expires every client's session at once and kazoo opens a new one within
#: milliseconds; failing reads in between made lookups refuse clients, who then backed off.
READ_RESUME_S = 1.0

#: How long ``close`` waits for kazoo to end the session. With ZooKeeper gone kazoo's stop waits
#: out its connection attempts (up to the session timeout, then joins its thread without a bound):
#: past this the client is left to its daemon threads, which do not keep the process alive.
CLOSE_TIMEOUT_S = 5.0


class ConnectionLossError(MetadataError):
    """The connection dropped mid-request: the session may live on (kazoo reconnects)."""


def _translate(exc: BaseException, path: str) -> BaseException:
    """kazoo's exception -> the contract's, naming the path."""
    if isinstance(exc, kx.NoNodeError):
        return NoNodeError(path)
    if isinstance(exc, kx.NodeExistsError):
        return NodeExistsError(path)
    if isinstance(exc, kx.BadVersionError):
        return BadVersionError(path, f"version conflict on {path}")
    if isinstance(exc, kx.NotEmptyError):
        return NotEmptyError(path, f"{path} has children")
    if isinstance(exc, kx.NoChildrenForEphemeralsError):
        return MetadataError(path, f"an ephemeral node cannot have children: {path}")
    if isinstance(exc, (kx.SessionExpiredError, kx.ConnectionClosedError)):
        return SessionExpiredError(path, f"ZooKeeper session expired or closed ({path})")
    if isinstance(exc, kx.ConnectionLoss):
        return ConnectionLossError(path, f"connection to ZooKeeper lost during an operation on {path}")
    if isinstance(exc, kx.ZookeeperError):
        return MetadataError(path, f"ZooKeeper error on {path}: {type(exc).__name__} {exc}")
    return exc


def _stat(zstat: ZnodeStat) -> Stat:
    return Stat(zstat.version, zstat.ephemeralOwner != 0, zstat.ctime, zstat.mtime)


class ZooKeeperStore(MetadataStore):
    def __init__(self, client: KazooClient, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop
        self._watchers = Watchers(loop)
        self._armed: set[tuple[str, bool]] = set()
        #: (creation zxid, version) of each watched node as last seen; None: absent
        self._known: dict[str, tuple[int, int] | None] = {}
        self._expired = False
        self._closed = False
        #: set while connected; reads that met an expiry or a lost connection wait on it
        self._session_open = asyncio.Event()
        #: requests kazoo has not answered: it keeps a request made while disconnected until it
        #: reconnects, so ``close`` fails them rather than leave their callers waiting for ever
        self._pending: set[asyncio.Future[Any]] = set()
        self._batches = WriteBatches(client, loop, self._link, self._fail)
        if client.connected:
            self._session_open.set()
        client.add_listener(self._on_state)

    @property
    def client(self) -> KazooClient:
        return self._client

    # -- bridging -------------------------------------------------------------------------------
    async def _bridge(self, result: Any, path: str) -> Any:
        if self._closed:
            raise SessionExpiredError(path, "the metadata store is closed")
        future: asyncio.Future[Any] = self._loop.create_future()
        self._link(result, path, future)
        return await future

    def _link(self, result: Any, path: str, future: asyncio.Future[Any]) -> None:
        """Settle ``future`` with kazoo's ``result`` (errors translated for ``path``)."""

        def settle(res: Any) -> None:
            try:
                value = res.get_nowait()
            except BaseException as exc:  # delivered to the awaiting coroutine
                error = _translate(exc, path)
                self._loop.call_soon_threadsafe(_settle_exception, future, error)
            else:
                self._loop.call_soon_threadsafe(_settle_result, future, value)

        self._watch_pending(future)
        result.rawlink(Inline(settle))  # settle only hands the answer to the loop

    def _watch_pending(self, future: asyncio.Future[Any]) -> None:
        if future not in self._pending:
            self._pending.add(future)
            future.add_done_callback(self._pending.discard)

    def _fail(self, future: asyncio.Future[Any], exc: BaseException, path: str) -> None:
        _settle_exception(future, _translate(exc, path))

    async def _write(
        self, path: str, add: Callable[[TransactionRequest], None], single: Callable[[], Any], size: int
    ) -> Any:
        """A write, sent in a multi with the others of this turn of the loop (zk_batches.py)."""
        if self._closed:
            raise SessionExpiredError(path, "the metadata store is closed")
        future = self._batches.write(path, add, single, size)
        self._watch_pending(future)
        return await future

    # -- reads ----------------------------------------------------------------------------------
    async def _read(self, start: Callable[[], Any], path: str) -> Any:
        """A read that meets a lost connection or an expired session waits for the connection
        (or the next session) and is asked again.

        Reads only: nothing a read does depends on the session, whereas a write (an ephemeral
        node, a compare-and-set its caller decided under the old session) must fail its caller.
        """
        deadline = self._loop.time() + READ_RESUME_S
        while True:
            try:
                return await self._bridge(start(), path)
            except (SessionExpiredError, ConnectionLossError):
                if self._closed or not await self._session_reopened(deadline):
                    raise

    async def _session_reopened(self, deadline: float) -> bool:
        remaining = deadline - self._loop.time()
        if remaining <= 0:
            return False
        if self._session_open.is_set():
            # kazoo may fail the read before its state listener has reached this loop
            await asyncio.sleep(min(0.05, remaining))
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._session_open.wait(), remaining)
        return self._session_open.is_set()

    async def get(self, path: str) -> tuple[bytes, Stat]:
        checked = paths.check(path)
        data, zstat = await self._read(lambda: self._client.get_async(checked), path)
        return bytes(data or b""), _stat(zstat)

    async def exists(self, path: str) -> Stat | None:
        checked = paths.check(path)
        zstat = await self._read(lambda: self._client.exists_async(checked), path)
        return _stat(zstat) if zstat is not None else None

    async def children(self, path: str) -> list[str]:
        checked = paths.check(path)
        names = await self._read(lambda: self._client.get_children_async(checked), path)
        return sorted(names)

    # -- writes ---------------------------------------------------------------------------------
    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = True,
    ) -> str:
        paths.check(path)
        try:
            created = await self._write(
                path,
                lambda tx: tx.create(path, value, ephemeral=ephemeral, sequence=sequential),
                # sent alone (the only write of its turn, or after a refused multi): kazoo makes the parents
                lambda: self._client.create_async(
                    path, value, ephemeral=ephemeral, sequence=sequential, makepath=make_parents
                ),
                len(path) + len(value),
            )
        except NoNodeError as exc:
            raise NoNodeError(paths.parent(path), f"parent of {path} does not exist") from exc
        return str(created)

    async def put(self, path: str, value: bytes, *, expected_version: int | None = None) -> Stat:
        paths.check(path)
        if expected_version == -1:
            await self.create(path, value)
            _, stat = await self.get(path)
            return stat
        if expected_version is not None:
            return _stat(await self._set(path, value, expected_version))
        while True:  # unconditional: set, or create when missing (racing creators retry the set)
            try:
                return _stat(await self._set(path, value, -1))
            except NoNodeError:
                pass
            try:
                await self.create(path, value)
                _, stat = await self.get(path)
                return stat
            except NodeExistsError:
                continue

    async def delete(
        self, path: str, *, expected_version: int | None = None, recursive: bool = False
    ) -> None:
        paths.check(path)
        if path == "/":
            raise MetadataError(path, "the root cannot be deleted")
        if recursive:
            if expected_version is not None:
                _, stat = await self.get(path)
                if stat.version != expected_version:
                    raise BadVersionError(path, f"version conflict on {path}")
            for child in await self.children(path):
                with contextlib.suppress(NoNodeError):
                    await self.delete(paths.join(path, child), recursive=True)
        version = -1 if expected_version is None else expected_version
        await self._write(
            path,
            lambda tx: tx.delete(path, version),
            lambda: self._client.delete_async(path, version),
            len(path),
        )

    async def _set(self, path: str, value: bytes, version: int) -> ZnodeStat:
        zstat: ZnodeStat = await self._write(
            path,
            lambda tx: tx.set_data(path, value, version),
            lambda: self._client.set_async(path, value, version),
            len(path) + len(value),
        )
        return zstat

    # -- watches --------------------------------------------------------------------------------
    def watch(self, path: str, callback: WatchCallback, *, children: bool = False) -> None:
        if self._watchers.add(paths.check(path), callback, children=children):
            self._arm(path, children)

    def unwatch(self, path: str, callback: WatchCallback) -> None:
        self._watchers.remove(path, callback)

    def _arm(self, path: str, children: bool, *, fired: bool = False) -> None:
        """Register a one-shot ZooKeeper watch for ``path`` (callable from kazoo's threads).

        Events are derived from the state read while re-arming, and delivered only once the
        watch is in place again: a change between the firing and the re-arm is then reported
        too (as the difference it made), where bare one-shot watches would lose it.
        """
        if self._closed or not self._watchers.watching(path, children=children):
            self._armed.discard((path, children))
            self._known.pop(path, None)
            return
        self._armed.add((path, children))

        def on_fire(_event: WatchedEvent) -> None:
            self._arm(path, children, fired=True)

        if children:
            self._client.get_children_async(path, watch=on_fire).rawlink(
                lambda result: self._children_armed(path, result, fired, on_fire)
            )
        else:
            self._client.exists_async(path, watch=on_fire).rawlink(
                lambda result: self._data_armed(path, result)
            )

    def _children_armed(
        self, path: str, result: Any, fired: bool, on_fire: Callable[[WatchedEvent], None]
    ) -> None:
        try:
            result.get_nowait()
        except kx.NoNodeError:
            # No node, so no child watch: wait for its creation, then watch its children. A node
            # created before the exists watch is set (a bookie's first registration while a
            # broker starts) fires nothing, since that watch sees its data, never its children.
            self._client.exists_async(path, watch=on_fire).rawlink(
                lambda found: self._created_meanwhile(path, found)
            )
        except kx.KazooException:
            log.debug("children watch on %s not armed", path, exc_info=True)
            return
        if fired:
            self._watchers.dispatch(WatchEvent(EventType.CHILDREN, path))

    def _created_meanwhile(self, path: str, result: Any) -> None:
        """A node missing when its children watch was armed, found by the exists watch that
        waits for it: it was created in between, so arm the children watch now and report the
        change, which nothing else would."""
        try:
            zstat = result.get_nowait()
        except kx.KazooException:
            log.debug("exists watch on %s not armed", path, exc_info=True)
            return
        if zstat is not None:
            self._arm(path, True, fired=True)

    def _data_armed(self, path: str, result: Any) -> None:
        try:
            zstat = result.get_nowait()
        except kx.KazooException:
            log.debug("data watch on %s not armed", path, exc_info=True)
            return
        state = (zstat.czxid, zstat.version) if zstat is not None else None
        first = path not in self._known
        previous = self._known.get(path)
        self._known[path] = state
        if first or previous == state:
            return
        if previous is None:
            kinds = [EventType.CREATED]
        elif state is None:
            kinds = [EventType.DELETED]
        elif previous[0] != state[0]:  # deleted and created again in between
            kinds = [EventType.DELETED, EventType.CREATED]
        else:
            kinds = [EventType.CHANGED]
        for kind in kinds:
            self._watchers.dispatch(WatchEvent(kind, path))

    # -- sessions -------------------------------------------------------------------------------
    def on_session_event(self, callback: SessionCallback) -> None:
        self._watchers.add_session_listener(callback)

    def _on_state(self, state: str) -> None:
        """kazoo's listener (its thread): LOST means the session expired; kazoo then opens a
        new one by itself, which we report as CONNECTED and re-arm every watch on."""
        if self._closed:
            return
        if state == KazooState.LOST:
            self._expired = True
            self._loop.call_soon_threadsafe(self._session_open.clear)
            self._watchers.session_changed(SessionState.EXPIRED)
        elif state == KazooState.SUSPENDED:
            self._loop.call_soon_threadsafe(self._session_open.clear)
            self._watchers.session_changed(SessionState.SUSPENDED)
        elif state == KazooState.CONNECTED:
            self._loop.call_soon_threadsafe(self._session_open.set)
            if self._expired:
                self._expired = False
                self._loop.call_soon_threadsafe(self._rearm_all)
            self._watchers.session_changed(SessionState.CONNECTED)

    def _rearm_all(self) -> None:
        for path, children in list(self._armed):
            self._arm(path, children, fired=True)

    @property
    def session_id(self) -> int:
        client_id = self._client.client_id
        return int(client_id[0]) if client_id else 0

    def election(self, path: str, identity: str) -> LeaderElection:
        return StoreLeaderElection(self, path, identity)

    async def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """End the session; within ``timeout_s`` whatever ZooKeeper does (a session not closed
        expires on the server after the session timeout, its ephemerals with it)."""
        if self._closed:
            return
        self._closed = True
        for future in list(self._pending):
            _settle_exception(future, SessionExpiredError("/", "the metadata store is closed"))
        stopped = self._loop.create_future()

        def stop() -> None:
            try:
                _stop(self._client)
            except Exception as exc:  # kazoo's WriterNotClosedException among others
                log.warning("ZooKeeper client did not stop cleanly: %s", exc)
            with contextlib.suppress(RuntimeError):  # the loop may be gone by then
                self._loop.call_soon_threadsafe(_settle_result, stopped, None)

        # A daemon thread, not asyncio.to_thread: the default executor's threads are waited for
        # when the loop shuts down, so a kazoo stop that never returns would hold the process.
        threading.Thread(target=stop, name="kazoo-stop", daemon=True).start()
        try:
            await asyncio.wait_for(stopped, timeout_s)
        except TimeoutError:
            log.warning(
                "ZooKeeper session not closed within %.1fs (ZooKeeper unreachable?): giving up; "
                "the server expires it after the session timeout",
                timeout_s,
            )
        await self._watchers.drain()


def _stop(client: KazooClient) -> None:
    client.stop()
    client.close()


def _settle_result(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)


def _settle_exception(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _reconnects() -> KazooRetry:
    """Reconnect without end, at most a tenth of a second (and a jitter) apart.

    kazoo's default backs off up to an hour: after a 40 s ZooKeeper outage a broker or bookie
    waited seconds more to notice the server was back (and that its session had expired), so
    its bundles and registration came back late and publishing stalled well past the outage.
    Every pause here is on that path: a client asleep between two attempts when ZooKeeper
    returns learns of its expired session only at its next attempt, and the new session is
    opened one retry delay after the expiry. Attempts half a second apart put up to 0.6 s of
    sleep before a bookie's registration or a broker's bundles came back. Against a frozen
    ZooKeeper each attempt waits out its connect timeout, so a client tries about once a second;
    against one that refuses connections, up to ten times a second, which costs the client well
    under 1% of a core (and kazoo's line for each attempt is throttled: repeated_logs.py).
    """
    return KazooRetry(max_tries=-1, delay=0.02, backoff=2, max_jitter=0.05, max_delay=0.1)


async def open_zookeeper_store(hosts: str, chroot: str, session_timeout_s: float) -> ZooKeeperStore:
    """Connect, create the chroot if it is missing, and return a store rooted there."""
    # an attempt logs a line or two, and attempts come several a second while ZooKeeper is down
    throttle(logging.getLogger("kazoo.client"))
    client = KazooClient(
        hosts=hosts, timeout=session_timeout_s, connection_retry=_reconnects(), handler=PollingHandler()
    )
    try:
        await asyncio.to_thread(client.start, min(session_timeout_s, 15.0))
    except Exception as exc:
        await asyncio.to_thread(_stop, client)
        raise MetadataError("/", f"cannot connect to ZooKeeper at {hosts}: {exc}") from exc
    if chroot:
        paths.check(chroot)
        await asyncio.to_thread(client.ensure_path, chroot)
        client.chroot = chroot
    return ZooKeeperStore(client, asyncio.get_running_loop())
