"""One connection to one bookie, shared by every ledger the client writes or reads.

Adds are pipelined: every add queued while the previous request was being written goes out in the
next ``AddRequest`` (one message for many entries, which is what makes Python fast enough here),
put together from entries serialized once (``add_request.py``), and results come back on the same
stream. The stream is the bookie's framed add port where its registration names one (length-
prefixed frames on a plain asyncio connection, ``frames.py``: a fraction of gRPC's CPU per
request), else gRPC's AddEntries stream; the other calls are gRPC's. A broken stream fails every
add still waiting on it with ``BookieUnavailableError``; the next add opens a new stream (looking
the add port up again), so a restarted bookie is used again.

A connection given the bookie's registration (``locate``) follows it, as BookKeeper's clients
follow a bookie's BookieServiceInfo: it connects to the registered address, at the registered IP
where there is one (TLS still checks the registered host name), and reads the registration again
at each new add stream, before waiting for a connection and after a call found the bookie
unavailable. A bookie made again elsewhere under the same id (a pod restarted: its name, a new
IP) is then reached at its new address at once, not after an attempt at its old one; while it is
not registered, a new add stream to it fails its adds at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import grpc

from magnetar.bookie.client.add_frames import AddFrames
from magnetar.bookie.client.add_request import EncodedEntry, encode
from magnetar.bookie.client.errors import (
    BKError,
    BookieUnavailableError,
    DigestMismatchError,
    DuplicateEntryIdError,
    LedgerFencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    UnauthorizedAccessError,
)
from magnetar.bookie.errors import REASON_METADATA_KEY
from magnetar.bookie.frames import framed
from magnetar.bookie.layout import BookieRegistration
from magnetar.common.futures import settle
from magnetar.common.grpc_tls import explain_refusal, open_channel
from magnetar.proto import bookie_pb2 as pb
from magnetar.proto import bookie_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

#: maps a bookie id to the address it listens on (gRPC), or to its framed add port ("": none)
BookieResolver = Callable[[str], Awaitable[str]]
#: a bookie's registration now, by its id (None: not registered now)
BookieLocator = Callable[[str], Awaitable[BookieRegistration | None]]
#: an add's outcome: None once the bookie has made the entry durable, else why not
AddCallback = Callable[[BKError | None], None]

_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: at most this many entries in one AddRequest, so one huge batch cannot delay every other result
_MAX_BATCH_ENTRIES = 512
#: the add stream's method, called with requests serialized here (``add_request.encode``)
_ADD_ENTRIES = "/{}/AddEntries".format(pb.DESCRIPTOR.services_by_name["Bookie"].full_name)
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    # Fail fast while a bookie is down instead of queueing RPCs behind a reconnect backoff.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # A bookie made again elsewhere (a pod restarted: same name, new address) is found at once:
    # by default gRPC resolves a name at most every 30 s and gives a connection attempt 20 s, so
    # a writer that chose the restarted bookie as a replacement kept trying its old address and
    # stalled 10-20 s (the rolling restart's window on pods).
    ("grpc.dns_min_time_between_resolutions_ms", 1000),
    ("grpc.min_reconnect_backoff_ms", 2000),
]


class _Target(NamedTuple):
    """Where to connect for a registered ``host:port``."""

    host: str  # the registered IP where there is one, else the registered host
    port: int
    name: str  # the registered host: what TLS checks

    @property
    def grpc(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def _reach(address: str, ip: str = "") -> _Target | None:
    """``address`` (``host:port``) at ``ip`` when one is given; None for an address without a port."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return None
    name = host.strip("[]")
    return _Target(ip or name, int(port), name)


class CorruptEntryError(BKError):
    def __init__(self, bookie: str, ledger_id: int, entry_id: int, detail: str) -> None:
        self.bookie = bookie
        super().__init__(f"bookie {bookie} reports entry {ledger_id}:{entry_id} corrupt: {detail}")


class BookieReadOnlyError(BookieUnavailableError):
    pass


def add_failure(bookie: str, ledger_id: int, entry_id: int, reason: int, message: str) -> BKError:
    """The exception for an AddResult that is not OK."""
    if reason == pb.LEDGER_FENCED:
        return LedgerFencedError(ledger_id)
    if reason == pb.BOOKIE_READ_ONLY:
        return BookieReadOnlyError(bookie, message or "read-only")
    if reason == pb.DIGEST_MISMATCH:
        return DigestMismatchError(ledger_id, entry_id, bookie)
    if reason == pb.UNAUTHORIZED_ACCESS:
        return UnauthorizedAccessError(ledger_id, bookie, message)
    if reason == pb.DUPLICATE_ENTRY_ID:
        return DuplicateEntryIdError(ledger_id, entry_id, bookie)
    return BookieUnavailableError(
        bookie, f"add {ledger_id}:{entry_id} failed: {pb.Reason.Name(reason)} {message}"
    )


def rpc_failure(
    bookie: str, ledger_id: int, entry_id: int, error: grpc.aio.AioRpcError, *, tls: bool = False
) -> BKError:
    """The exception for a failed unary RPC, from its status and the reason in its trailers;
    ``tls``: the channel is TLS, so a dropped connection is explained as a refused handshake."""
    trailers: Any = error.trailing_metadata() or ()
    reason = next((str(value) for key, value in trailers if key == REASON_METADATA_KEY), "")
    detail = error.details() or error.code().name
    if tls and error.code() == grpc.StatusCode.UNAVAILABLE:
        detail = explain_refusal(detail)
    if reason == "NO_SUCH_LEDGER":
        return NoSuchLedgerError(ledger_id, where=f"bookie {bookie}")
    if reason == "NO_SUCH_ENTRY" or (not reason and error.code() == grpc.StatusCode.NOT_FOUND):
        return NoSuchEntryError(ledger_id, entry_id, f"not on bookie {bookie}")
    if reason == "CORRUPT_ENTRY" or error.code() == grpc.StatusCode.DATA_LOSS:
        return CorruptEntryError(bookie, ledger_id, entry_id, detail)
    if reason == "LEDGER_FENCED":
        return LedgerFencedError(ledger_id)
    if reason == "UNAUTHORIZED_ACCESS":
        return UnauthorizedAccessError(ledger_id, bookie, detail)
    return BookieUnavailableError(bookie, f"{error.code().name}: {detail}")


class BookieConnection:
    def __init__(
        self,
        bookie_id: str,
        address: str,
        *,
        rpc_timeout_s: float = 10.0,
        connect_timeout_s: float = 10.0,
        credentials: grpc.ChannelCredentials | None = None,
        find_add_port: BookieResolver | None = None,
        add_port_tls: ssl.SSLContext | None = None,
        locate: BookieLocator | None = None,
        registration: BookieRegistration | None = None,
        framed_adds: bool = True,
    ) -> None:
        """``credentials``: TLS (see ``magnetar.common.grpc_tls``); None: plain text.
        ``find_add_port``: the bookie's framed add port, looked up at each new add stream (None:
        adds over gRPC), reached with ``add_port_tls`` when the channel is TLS.
        ``locate``: the bookie's registration, followed as the module says (then ``find_add_port``
        is not used: the registration's add port is, unless ``framed_adds`` is off);
        ``registration``: the one read last, where to connect first instead of ``address``."""
        self.bookie_id = bookie_id
        self.address = address
        self._rpc_timeout_s = rpc_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._credentials = credentials
        self._tls = credentials is not None
        self._locate = locate
        self._framed_adds = framed_adds
        #: times this connection followed the bookie's registration to another address
        self.moves = 0
        self._closing_channels: set[asyncio.Task[None]] = set()
        self._relocating: asyncio.Task[BookieRegistration | None] | None = None
        first = _reach(registration.address, registration.ip) if registration is not None else None
        if registration is not None and first is not None:
            self.address = registration.address
            self._target = first.grpc
            self._open_channel(first.grpc, first.name if registration.ip else None)
        else:
            self._target = address
            self._open_channel(address, None)
        self._outbox: deque[tuple[EncodedEntry, bool, bytes]] = deque()
        self._waiting: defaultdict[tuple[int, int], deque[AddCallback]] = defaultdict(deque)
        self._wakeup = asyncio.Event()
        self._stream_task: asyncio.Task[None] | None = None
        self._closed = False
        self._find_add_port = find_add_port
        self._add_port_tls = add_port_tls
        #: the framed add connection while it is open
        self._frames: asyncio.Transport | None = None
        self._flush_scheduled = False

    # -- where the bookie is ----------------------------------------------------------------------

    def _open_channel(self, target: str, tls_name: str | None) -> None:
        options: list[tuple[str, int | str]] = list(_CHANNEL_OPTIONS)
        if tls_name is not None and self._credentials is not None:
            # Connected by IP, the bookie's certificate is still checked against its host name.
            options.append(("grpc.ssl_target_name_override", tls_name))
        self._channel = open_channel(target, self._credentials, options)
        self._stub = pb_grpc.BookieStub(self._channel)  # type: ignore[no-untyped-call]
        self._add_entries = self._channel.stream_stream(
            _ADD_ENTRIES, request_serializer=None, response_deserializer=pb.AddResponse.FromString
        )

    def _follow(self, registration: BookieRegistration) -> None:
        """Point the gRPC channel at the registered address (at its IP), if it is elsewhere now.
        The old channel is closed: calls still on it fail, as they would at a bookie gone away."""
        target = _reach(registration.address, registration.ip)
        if target is None or target.grpc == self._target:
            return
        log.info(
            "bookie %s: following its registration to %s (was %s)", self.bookie_id, target.grpc, self._target
        )
        self.moves += 1
        old = self._channel
        self.address = registration.address
        self._target = target.grpc
        self._open_channel(target.grpc, target.name if registration.ip else None)
        closing = asyncio.get_running_loop().create_task(old.close(grace=None))
        self._closing_channels.add(closing)
        closing.add_done_callback(self._closing_channels.discard)

    async def _lookup(self) -> tuple[bool, BookieRegistration | None]:
        """``(answered, registration)``: the bookie's registration now (None: not registered),
        followed. ``answered`` is False when it is not known within the connect timeout: the
        metadata store may be away, and calls need not wait for it."""
        if self._locate is None:
            return False, None
        try:
            registration = await asyncio.wait_for(self._locate(self.bookie_id), self._connect_timeout_s)
        except Exception:  # any failure to look it up leaves the connection where it is
            return False, None
        if registration is not None and not self._closed:
            self._follow(registration)
        return True, registration

    async def _registration(self) -> BookieRegistration | None:
        return (await self._lookup())[1]

    def _relocate_soon(self, error: grpc.aio.AioRpcError) -> None:
        """After a call found the bookie unavailable: read its registration in the background, so
        the next call goes where it is now."""
        if self._locate is None or error.code() != grpc.StatusCode.UNAVAILABLE:
            return
        if self._relocating is None or self._relocating.done():
            self._relocating = asyncio.get_running_loop().create_task(self._registration())

    # -- adds ------------------------------------------------------------------------------------

    def add(
        self, entry: pb.Entry | EncodedEntry, master_key: bytes, *, recovery: bool = False
    ) -> asyncio.Future[None]:
        """Queue an add; the future completes when the bookie has made the entry durable."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.add_then(entry, master_key, functools.partial(settle, future, None), recovery=recovery)
        return future

    def add_then(
        self,
        entry: pb.Entry | EncodedEntry,
        master_key: bytes,
        done: AddCallback,
        *,
        recovery: bool = False,
    ) -> None:
        """Queue an add; ``done`` is called with None once the bookie has made the entry durable,
        else with the add's error, as the answer is read (no future or loop turn per add: a
        writer's hot path). An entry sent to several bookies is best given encoded
        (``EncodedEntry.of``), once."""
        if isinstance(entry, pb.Entry):
            entry = EncodedEntry.of(entry)
        if self._closed:
            error = BookieUnavailableError(self.bookie_id, "connection closed")
            asyncio.get_running_loop().call_soon(done, error)
            return
        self._waiting[(entry.ledger_id, entry.entry_id)].append(done)
        self._outbox.append((entry, recovery, master_key))
        if self._frames is not None:
            if not self._flush_scheduled:
                self._flush_scheduled = True
                asyncio.get_running_loop().call_soon(self._flush_frames)
        else:
            self._wakeup.set()
        if self._stream_task is None or self._stream_task.done():
            self._stream_task = asyncio.create_task(self._run_stream(), name=f"add-stream-{self.bookie_id}")

    async def _run_stream(self) -> None:
        if self._locate is not None:
            answered, registration = await self._lookup()
            if answered and registration is None:
                # Gone away, or not back yet: the address it had may be a deleted pod's, where an
                # attempt would only wait out its timeout. The adds fail now, and their writers
                # replace the bookie (as BookKeeper's clients do with a bookie id they cannot
                # resolve).
                self._fail_all(BookieUnavailableError(self.bookie_id, "not registered"))
                return
            target = self._framed_target(registration)
        else:
            target = await self._add_port()
        if target is not None:
            await self._run_framed(target)
        else:
            await self._run_grpc_stream()

    def _framed_target(self, registration: BookieRegistration | None) -> _Target | None:
        """Where the registration's framed add port is (None: none, or the registration unknown)."""
        if registration is None or not self._framed_adds or not registration.add_address:
            return None
        return _reach(registration.add_address, registration.ip)

    async def _add_port(self) -> _Target | None:
        """The framed add port ``find_add_port`` names now, or None (none, or not known within the
        connect timeout: the metadata store may be away, and adds need not wait for it)."""
        if self._find_add_port is None:
            return None
        try:
            address = await asyncio.wait_for(self._find_add_port(self.bookie_id), self._connect_timeout_s)
        except Exception:  # any failure to look it up leaves gRPC's stream
            return None
        return _reach(address) if address else None

    async def _run_framed(self, target: _Target) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, frames = await asyncio.wait_for(
                loop.create_connection(
                    lambda: AddFrames(self._complete),
                    target.host,
                    target.port,
                    ssl=self._add_port_tls,
                    server_hostname=target.name if self._add_port_tls is not None else None,
                ),
                self._connect_timeout_s,
            )
        except (OSError, TimeoutError) as exc:
            detail = f"cannot reach its add port {target.grpc}: {exc or type(exc).__name__}"
            self._fail_all(BookieUnavailableError(self.bookie_id, detail))
            return
        self._frames = transport
        try:
            self._flush_frames()
            await frames.closed
        finally:
            self._frames = None
            transport.close()
            self._fail_all(BookieUnavailableError(self.bookie_id, frames.why))

    def _flush_frames(self) -> None:
        """Write every request the outbox holds in one write (called once per loop turn)."""
        self._flush_scheduled = False
        if self._frames is not None and self._outbox:
            self._frames.write(framed(self._drain_outbox()))

    async def _run_grpc_stream(self) -> None:
        # No request iterator: requests go out through call.write as the outbox fills.
        call: grpc.aio.StreamStreamCall[bytes, pb.AddResponse] = self._add_entries()  # type: ignore[call-arg]
        reader = asyncio.create_task(self._read_results(call))
        try:
            while not self._closed:
                if not self._outbox:
                    self._wakeup.clear()
                    waiter = asyncio.create_task(self._wakeup.wait())
                    done, _ = await asyncio.wait({waiter, reader}, return_when=asyncio.FIRST_COMPLETED)
                    if reader in done:
                        waiter.cancel()
                        break
                    continue
                for request in self._drain_outbox():
                    await call.write(request)
            await reader
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError) as exc:
            self._fail_all(BookieUnavailableError(self.bookie_id, _describe(exc, tls=self._tls)))
        finally:
            reader.cancel()
            call.cancel()
            if self._waiting:
                self._fail_all(BookieUnavailableError(self.bookie_id, "add stream ended"))

    def _drain_outbox(self) -> list[bytes]:
        requests: list[bytes] = []
        while self._outbox:
            recovery = self._outbox[0][1]
            entries: list[bytes] = []
            keys: dict[int, bytes] = {}
            while self._outbox and self._outbox[0][1] == recovery and len(entries) < _MAX_BATCH_ENTRIES:
                entry, _, key = self._outbox[0]
                if keys.setdefault(entry.ledger_id, key) != key:
                    break  # one key per ledger in a request: another key starts the next one
                self._outbox.popleft()
                entries.append(entry.data)
            requests.append(encode(entries, recovery, keys))
        return requests

    async def _read_results(self, call: grpc.aio.StreamStreamCall[bytes, pb.AddResponse]) -> None:
        try:
            async for response in call:
                for result in response.results:
                    self._complete(result)
        except grpc.aio.AioRpcError as exc:
            self._fail_all(BookieUnavailableError(self.bookie_id, _describe(exc, tls=self._tls)))
        else:
            # The bookie ended the stream (shutdown): nothing more will be answered on it.
            self._fail_all(BookieUnavailableError(self.bookie_id, "bookie closed the add stream"))

    def _complete(self, result: pb.AddResult) -> None:
        key = (result.ledger_id, result.entry_id)
        callbacks = self._waiting.get(key)
        if not callbacks:
            return  # answered after we gave up on it (stream reset); nothing waits any more
        done = callbacks.popleft()
        if not callbacks:
            del self._waiting[key]
        if result.reason == pb.OK:
            _call(done, None)
        else:
            _call(
                done,
                add_failure(self.bookie_id, result.ledger_id, result.entry_id, result.reason, result.message),
            )

    def _fail_all(self, error: BKError) -> None:
        self._outbox.clear()
        waiting, self._waiting = self._waiting, defaultdict(deque)
        for callbacks in waiting.values():
            for done in callbacks:
                _call(done, error)

    # -- unary RPCs --------------------------------------------------------------------------------

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, long_poll_ms: int = 0, master_key: bytes = b""
    ) -> pb.ReadResponse:
        """Read one entry; recovery reads pass the ledger's ``master_key`` for the bookie to check."""
        request = pb.ReadRequest(
            ledger_id=ledger_id, entry_id=entry_id, long_poll_timeout_ms=long_poll_ms, master_key=master_key
        )
        try:
            response: pb.ReadResponse = await self._stub.ReadEntry(
                request, timeout=self._rpc_timeout_s + long_poll_ms / 1000
            )
        except grpc.aio.AioRpcError as exc:
            self._relocate_soon(exc)
            raise rpc_failure(self.bookie_id, ledger_id, entry_id, exc, tls=self._tls) from None
        return response

    async def read_entries(
        self, ledger_id: int, entry_ids: list[int], *, max_bytes: int = 0, master_key: bytes = b""
    ) -> pb.ReadEntriesResponse:
        """Several entries in one call (see ReadEntries in bookie.proto): the first entries named,
        each served or failed with its reason, up to ``max_bytes`` of payload (0: the bookie's limit)."""
        request = pb.ReadEntriesRequest(
            ledger_id=ledger_id, entry_ids=entry_ids, max_bytes=max_bytes, master_key=master_key
        )
        first = entry_ids[0] if entry_ids else -1
        try:
            response: pb.ReadEntriesResponse = await self._stub.ReadEntries(
                request, timeout=self._rpc_timeout_s
            )
        except grpc.aio.AioRpcError as exc:
            self._relocate_soon(exc)
            raise rpc_failure(self.bookie_id, ledger_id, first, exc, tls=self._tls) from None
        return response

    async def read_lac(self, ledger_id: int, *, previous_lac: int = -1, long_poll_ms: int = 0) -> int:
        request = pb.ReadLacRequest(
            ledger_id=ledger_id, previous_lac=previous_lac, long_poll_timeout_ms=long_poll_ms
        )
        try:
            response: pb.ReadLacResponse = await self._stub.ReadLac(
                request, timeout=self._rpc_timeout_s + long_poll_ms / 1000
            )
        except grpc.aio.AioRpcError as exc:
            self._relocate_soon(exc)
            raise rpc_failure(self.bookie_id, ledger_id, -1, exc, tls=self._tls) from None
        return response.last_add_confirmed

    async def write_lac(self, ledger_id: int, lac: int, master_key: bytes) -> None:
        try:
            await self._stub.WriteLac(
                pb.WriteLacRequest(ledger_id=ledger_id, last_add_confirmed=lac, master_key=master_key),
                timeout=self._rpc_timeout_s,
            )
        except grpc.aio.AioRpcError as exc:
            self._relocate_soon(exc)
            raise rpc_failure(self.bookie_id, ledger_id, -1, exc, tls=self._tls) from None

    async def fence(self, ledger_id: int, master_key: bytes) -> pb.FenceResponse:
        try:
            response: pb.FenceResponse = await self._stub.Fence(
                pb.FenceRequest(ledger_id=ledger_id, master_key=master_key), timeout=self._rpc_timeout_s
            )
        except grpc.aio.AioRpcError as exc:
            self._relocate_soon(exc)
            raise rpc_failure(self.bookie_id, ledger_id, -1, exc, tls=self._tls) from None
        return response

    async def info(self) -> pb.GetInfoResponse:
        try:
            response: pb.GetInfoResponse = await self._stub.GetInfo(
                pb.GetInfoRequest(), timeout=self._rpc_timeout_s
            )
        except grpc.aio.AioRpcError as exc:
            self._relocate_soon(exc)
            raise rpc_failure(self.bookie_id, -1, -1, exc, tls=self._tls) from None
        return response

    async def connected(self) -> bool:
        """Whether the channel is (or gets) connected within the connect timeout; it keeps
        trying meanwhile, following the bookie's name to a new address. With ``locate``, the
        bookie's registration is read first: a bookie registered elsewhere now is tried there."""
        if self._closed:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_timeout_s
        await self._registration()
        try:
            await asyncio.wait_for(self._channel.channel_ready(), max(deadline - loop.time(), 0.0))
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        self._closed = True
        self._wakeup.set()
        if self._frames is not None:
            self._frames.close()
        if self._stream_task is not None:
            self._stream_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stream_task
        self._fail_all(BookieUnavailableError(self.bookie_id, "connection closed"))
        if self._relocating is not None:
            self._relocating.cancel()
        await self._channel.close(grace=None)
        for closing in list(self._closing_channels):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await closing


def _call(done: AddCallback, error: BKError | None) -> None:
    """Run an add's callback where its answer is read; one that raises must not stop the answers
    after it (as a future's callback cannot)."""
    try:
        done(error)
    except Exception:
        log.exception("an add's callback failed")


def _describe(exc: BaseException, *, tls: bool) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        details = exc.details() or ""
        if tls and exc.code() == grpc.StatusCode.UNAVAILABLE:
            details = explain_refusal(details)
        return f"{exc.code().name}: {details}"
    return f"{type(exc).__name__}: {exc}"


class BookieConnectionPool:
    """One connection per bookie id, created on first use."""

    def __init__(
        self,
        resolve: BookieResolver,
        *,
        rpc_timeout_s: float = 10.0,
        connect_timeout_s: float = 10.0,
        credentials: grpc.ChannelCredentials | None = None,
        find_add_port: BookieResolver | None = None,
        add_port_tls: ssl.SSLContext | None = None,
        locate: BookieLocator | None = None,
        framed_adds: bool = True,
    ) -> None:
        """``resolve``: a bookie's address; ``locate``: its registration, which its connection
        then follows (``BookieConnection``)."""
        self._resolve = resolve
        self._locate = locate
        self._framed_adds = framed_adds
        self._find_add_port = find_add_port
        self._add_port_tls = add_port_tls
        self._rpc_timeout_s = rpc_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._credentials = credentials
        self._connections: dict[str, BookieConnection] = {}
        self._lock = asyncio.Lock()

    async def get(self, bookie_id: str) -> BookieConnection:
        connection = self._connections.get(bookie_id)
        if connection is not None:
            return connection
        async with self._lock:
            if bookie_id not in self._connections:
                registration = await self._locate(bookie_id) if self._locate is not None else None
                address = registration.address if registration is not None else await self._resolve(bookie_id)
                self._connections[bookie_id] = BookieConnection(
                    bookie_id,
                    address,
                    rpc_timeout_s=self._rpc_timeout_s,
                    connect_timeout_s=self._connect_timeout_s,
                    credentials=self._credentials,
                    find_add_port=self._find_add_port,
                    add_port_tls=self._add_port_tls,
                    locate=self._locate,
                    registration=registration,
                    framed_adds=self._framed_adds,
                )
            return self._connections[bookie_id]

    def cached(self, bookie_id: str) -> BookieConnection | None:
        return self._connections.get(bookie_id)

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.close()
