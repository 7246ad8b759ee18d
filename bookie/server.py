"""The bookie's gRPC service (``proto/bookie.proto``) and the in-process API to run one.

    server = await start_bookie(BookieConfig(bookie_port=0, journal_directory=..., ...))
    server.address      # "127.0.0.1:<bound port>"
    await server.stop()

Unary failures carry the ``Reason`` name in the trailing metadata key ``magnetar-reason``
(``bookie/errors.py``); add failures travel in-band, one ``AddResult`` per entry. Requests are
decoded here rather than by gRPC, so that bytes no client could have sent answer INVALID_ARGUMENT
with what was wrong instead of gRPC's generic UNKNOWN.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, Protocol

import grpc
from google.protobuf.message import DecodeError, Message

from magnetar.bookie.add_port import AddPort
from magnetar.bookie.autorecovery.service import AutoRecovery
from magnetar.bookie.bookie import BadRequestError, Bookie, ReadOnlyError, UnauthorizedError, journal_failed
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.disk_monitor import DiskMonitor
from magnetar.bookie.entry_log import CorruptEntryError, StoredEntry
from magnetar.bookie.errors import REASON_METADATA_KEY
from magnetar.bookie.gc import GarbageCollector
from magnetar.bookie.journal import JournalError
from magnetar.bookie.layout import DEFAULT_RACK, BookieRegistration
from magnetar.bookie.ledger_storage import NoSuchEntryError, NoSuchLedgerError
from magnetar.bookie.metrics import MetricsServer
from magnetar.bookie.registration import Registration
from magnetar.common.grpc_tls import add_port, grpc_server_credentials
from magnetar.common.metadata import MetadataStore, open_store
from magnetar.common.tls import CertificateReloader, server_context
from magnetar.proto import bookie_pb2 as pb
from magnetar.proto import bookie_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_SERVER_OPTIONS = [
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),  # a restarted bookie must not share its port with a stale one
]


async def _fail(
    context: grpc.aio.ServicerContext[object, object],
    code: grpc.StatusCode,
    reason: pb.Reason,
    message: str,
) -> NoReturn:
    await context.abort(code, message, trailing_metadata=((REASON_METADATA_KEY, pb.Reason.Name(reason)),))
    raise AssertionError("abort returned")  # pragma: no cover - abort always raises


_ServiceContext = grpc.aio.ServicerContext[Any, Any]
#: the payload bytes one ReadEntries answer carries at most, whatever the client asks for
READ_BATCH_MAX_BYTES = 16 * 1024 * 1024


def _unserved(failure: Exception) -> tuple[grpc.StatusCode, pb.Reason]:
    """Why an entry is not served, as ReadEntry fails and ReadEntries lists it."""
    if isinstance(failure, NoSuchLedgerError):
        return grpc.StatusCode.NOT_FOUND, pb.NO_SUCH_LEDGER
    if isinstance(failure, NoSuchEntryError):
        return grpc.StatusCode.NOT_FOUND, pb.NO_SUCH_ENTRY
    if isinstance(failure, CorruptEntryError):
        log.error("refusing to serve corrupt entry: %s", failure)
        return grpc.StatusCode.DATA_LOSS, pb.CORRUPT_ENTRY
    return grpc.StatusCode.INTERNAL, pb.INTERNAL


async def _decoded(message_type: type[Message], raw: bytes, context: _ServiceContext) -> Any:
    try:
        return message_type.FromString(raw)
    except DecodeError as exc:
        await _fail(
            context,
            grpc.StatusCode.INVALID_ARGUMENT,
            pb.INVALID_REQUEST,
            f"cannot decode {message_type.__name__} ({len(raw)} bytes): {exc}",
        )


def _unary(
    method: Callable[[Any, _ServiceContext], Awaitable[Message]],
    request_type: type[Message],
    response_type: type[Message],
) -> grpc.RpcMethodHandler[Any, Any]:
    async def handle(raw: bytes, context: _ServiceContext) -> Message:
        return await method(await _decoded(request_type, raw, context), context)

    return grpc.unary_unary_rpc_method_handler(
        handle, request_deserializer=None, response_serializer=response_type.SerializeToString
    )


def _add_entries(service: BookieService) -> grpc.RpcMethodHandler[Any, Any]:
    async def handle(
        raw_requests: AsyncIterator[bytes], context: _ServiceContext
    ) -> AsyncIterator[pb.AddResponse]:
        async def requests() -> AsyncIterator[pb.AddRequest]:
            async for raw in raw_requests:
                yield await _decoded(pb.AddRequest, raw, context)

        async for response in service.AddEntries(requests(), context):
            yield response

    return grpc.stream_stream_rpc_method_handler(
        handle, request_deserializer=None, response_serializer=pb.AddResponse.SerializeToString
    )


def _register(service: BookieService, server: grpc.aio.Server) -> None:
    handlers = {
        "AddEntries": _add_entries(service),
        "ReadEntry": _unary(service.ReadEntry, pb.ReadRequest, pb.ReadResponse),
        "ReadEntries": _unary(service.ReadEntries, pb.ReadEntriesRequest, pb.ReadEntriesResponse),
        "ReadLac": _unary(service.ReadLac, pb.ReadLacRequest, pb.ReadLacResponse),
        "WriteLac": _unary(service.WriteLac, pb.WriteLacRequest, pb.WriteLacResponse),
        "Fence": _unary(service.Fence, pb.FenceRequest, pb.FenceResponse),
        "GetInfo": _unary(service.GetInfo, pb.GetInfoRequest, pb.GetInfoResponse),
    }
    name = pb.DESCRIPTOR.services_by_name["Bookie"].full_name
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))


class BookieService(pb_grpc.BookieServicer):
    def __init__(self, bookie: Bookie, bookie_id: str) -> None:
        self._bookie = bookie
        self._bookie_id = bookie_id

    async def AddEntries(
        self,
        request_iterator: AsyncIterator[pb.AddRequest],
        context: grpc.aio.ServicerContext[object, object],
    ) -> AsyncIterator[pb.AddResponse]:
        # A reader task takes requests off the stream and starts them at once (so group commit
        # sees every stream's entries); this generator answers them in arrival order.
        answers: asyncio.Queue[tuple[float, asyncio.Future[None] | None, pb.AddResponse] | None]
        answers = asyncio.Queue()
        latency = self._bookie.stats.add_request_latency
        requests = self._bookie.stats.add_requests

        async def pump() -> None:
            try:
                async for request in request_iterator:
                    requests["grpc"] += 1
                    answers.put_nowait((time.perf_counter(), *self._bookie.add(request)))
            finally:
                answers.put_nowait(None)

        reader = asyncio.create_task(pump())
        try:
            while (item := await answers.get()) is not None:
                received, durable, response = item
                if durable is not None:
                    try:
                        await durable
                    except JournalError as exc:
                        response = journal_failed(response, str(exc))
                latency.since(received)
                yield response
            await reader  # re-raise what ended the request stream, if anything
        finally:
            reader.cancel()

    async def ReadEntry(
        self, request: pb.ReadRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.ReadResponse:
        ledger_id, entry_id = request.ledger_id, request.entry_id
        await self._admit_read(
            f"read {ledger_id}:{entry_id}", ledger_id, [entry_id], request.master_key, context
        )
        if request.long_poll_timeout_ms:
            lac = self._bookie.lac(ledger_id)
            if lac is None or lac < entry_id:
                waited = await self._bookie.storage.wait_lac(
                    ledger_id, entry_id - 1, request.long_poll_timeout_ms / 1000
                )
                if waited is None:
                    await _fail(
                        context,
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        pb.NO_SUCH_ENTRY,
                        f"entry {ledger_id}:{entry_id} not confirmed within "
                        f"{request.long_poll_timeout_ms} ms (LAC {lac if lac is not None else 'unknown'})",
                    )
        try:
            entry = await self._bookie.read(ledger_id, entry_id)
        except (NoSuchLedgerError, NoSuchEntryError, CorruptEntryError) as exc:
            await _fail(context, *_unserved(exc), str(exc))
        except OSError as exc:
            await _fail(
                context, grpc.StatusCode.INTERNAL, pb.INTERNAL, f"read {ledger_id}:{entry_id} failed: {exc}"
            )
        return pb.ReadResponse(
            entry=pb.Entry(
                ledger_id=ledger_id,
                entry_id=entry_id,
                last_add_confirmed=entry.lac,
                digest=entry.digest,
                payload=entry.payload,
            ),
            last_add_confirmed=self._bookie.lac(ledger_id) or -1,
        )

    async def ReadEntries(
        self, request: pb.ReadEntriesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.ReadEntriesResponse:
        ledger_id, entry_ids = request.ledger_id, list(request.entry_ids)
        what = f"read of {len(entry_ids)} entries of ledger {ledger_id}"
        await self._admit_read(what, ledger_id, entry_ids, request.master_key, context)
        limit = min(request.max_bytes or READ_BATCH_MAX_BYTES, READ_BATCH_MAX_BYTES)
        try:
            answered = await self._bookie.read_many(ledger_id, entry_ids, limit)
        except OSError as exc:
            await _fail(
                context,
                grpc.StatusCode.INTERNAL,
                pb.INTERNAL,
                f"read of {len(entry_ids)} entries of ledger {ledger_id} failed: {exc}",
            )
        response = pb.ReadEntriesResponse(last_add_confirmed=self._bookie.lac(ledger_id) or -1)
        for entry_id, found in answered:
            if isinstance(found, StoredEntry):
                response.entries.append(
                    pb.Entry(
                        ledger_id=ledger_id,
                        entry_id=entry_id,
                        last_add_confirmed=found.lac,
                        digest=found.digest,
                        payload=found.payload,
                    )
                )
            else:
                _, reason = _unserved(found)
                response.failed.append(pb.ReadFailure(entry_id=entry_id, reason=reason, message=str(found)))
        return response

    async def ReadLac(
        self, request: pb.ReadLacRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.ReadLacResponse:
        ledger_id = request.ledger_id
        if ledger_id < 0:
            await _fail(
                context, grpc.StatusCode.INVALID_ARGUMENT, pb.INVALID_REQUEST, f"ledger id {ledger_id} is < 0"
            )
        if request.long_poll_timeout_ms:
            # On timeout the current LAC is the answer (BookKeeper's long poll), not an error.
            await self._bookie.storage.wait_lac(
                ledger_id, request.previous_lac, request.long_poll_timeout_ms / 1000
            )
        lac = self._bookie.lac(ledger_id)
        if lac is None:
            await _fail(
                context,
                grpc.StatusCode.NOT_FOUND,
                pb.NO_SUCH_LEDGER,
                f"ledger {ledger_id} is not stored on this bookie",
            )
        return pb.ReadLacResponse(last_add_confirmed=lac)

    async def WriteLac(
        self, request: pb.WriteLacRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.WriteLacResponse:
        ledger_id = request.ledger_id
        if ledger_id < 0 or request.last_add_confirmed < -1:
            await _fail(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                pb.INVALID_REQUEST,
                f"explicit LAC {request.last_add_confirmed} for ledger {ledger_id}: "
                "ledger id must be >= 0 and LAC >= -1",
            )
        try:
            await self._bookie.write_lac(ledger_id, request.last_add_confirmed, request.master_key)
        except NoSuchLedgerError as exc:
            await _fail(context, grpc.StatusCode.NOT_FOUND, pb.NO_SUCH_LEDGER, str(exc))
        except UnauthorizedError as exc:
            await _fail(context, grpc.StatusCode.PERMISSION_DENIED, pb.UNAUTHORIZED_ACCESS, str(exc))
        except BadRequestError as exc:
            await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, pb.INVALID_REQUEST, str(exc))
        except ReadOnlyError as exc:
            await _fail(context, grpc.StatusCode.UNAVAILABLE, pb.BOOKIE_READ_ONLY, str(exc))
        except JournalError as exc:
            await _fail(context, grpc.StatusCode.INTERNAL, pb.INTERNAL, str(exc))
        return pb.WriteLacResponse()

    async def Fence(
        self, request: pb.FenceRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.FenceResponse:
        ledger_id = request.ledger_id
        if ledger_id < 0:
            await _fail(
                context, grpc.StatusCode.INVALID_ARGUMENT, pb.INVALID_REQUEST, f"ledger id {ledger_id} is < 0"
            )
        try:
            lac, last_entry = await self._bookie.fence(ledger_id, request.master_key)
        except UnauthorizedError as exc:
            await _fail(context, grpc.StatusCode.PERMISSION_DENIED, pb.UNAUTHORIZED_ACCESS, str(exc))
        except JournalError as exc:
            await _fail(
                context,
                grpc.StatusCode.INTERNAL,
                pb.INTERNAL,
                f"fence of ledger {ledger_id} not durable: {exc}",
            )
        return pb.FenceResponse(last_add_confirmed=lac, last_entry_id=last_entry)

    async def _admit_read(
        self, what: str, ledger_id: int, entry_ids: list[int], key: bytes, context: _ServiceContext
    ) -> None:
        """Fail a read of negative ids, or (when it carries a master key: recovery) of the wrong key."""
        if ledger_id < 0 or any(e < 0 for e in entry_ids):
            await _fail(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                pb.INVALID_REQUEST,
                f"{what}: ledger and entry ids must be >= 0",
            )
        if key:
            await self._authorize(ledger_id, key, context)

    async def _authorize(self, ledger_id: int, key: bytes, context: _ServiceContext) -> None:
        try:
            self._bookie.check_key(ledger_id, key)
        except UnauthorizedError as exc:
            await _fail(context, grpc.StatusCode.PERMISSION_DENIED, pb.UNAUTHORIZED_ACCESS, str(exc))

    async def GetInfo(
        self, request: pb.GetInfoRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.GetInfoResponse:
        usage = await asyncio.to_thread(shutil.disk_usage, self._bookie.ledger_dirs[0])
        return pb.GetInfoResponse(
            bookie_id=self._bookie_id,
            read_only=self._bookie.read_only,
            total_disk_bytes=usage.total,
            free_disk_bytes=usage.free,
        )


class BookieServer:
    """A running bookie: storage, gRPC server and (with a metadata store) registration, GC and
    the disk monitor. Build with ``start_bookie``."""

    def __init__(self, config: BookieConfig) -> None:
        self.config = config
        self.bookie = Bookie(config)
        self.port = 0
        self.bookie_id = ""
        self.address = ""
        #: ``host:port`` of the framed add port ("" when it is off)
        self.add_address = ""
        self._grpc: grpc.aio.Server | None = None
        self._add_port: AddPort | None = None
        self._services: list[_Service] = []
        self._stopping = False
        self._stopped = asyncio.Event()
        self._stop_task: asyncio.Task[None] | None = None
        self.recovery: AutoRecovery | None = None
        #: port of /metrics (0: statistics disabled)
        self.metrics_port = 0

    async def start(self) -> None:
        credentials = self._credentials()  # an unusable file fails here, before the journal replays
        await self.bookie.open()
        self._grpc = grpc.aio.server(options=_SERVER_OPTIONS)
        bind = f"{self.config.listen_address}:{self.config.bookie_port}"
        self.port = add_port(self._grpc, bind, credentials)
        if not self.port:
            await self.bookie.close()
            raise OSError(f"cannot bind the bookie's gRPC server to {bind}")
        self.bookie_id = self.config.id_for(self.port)
        self.address = self.config.address_for(self.port)
        _register(BookieService(self.bookie, self.bookie_id), self._grpc)
        await self._grpc.start()
        if self.config.framed_adds_enabled:
            await self._start_add_port()
        self._services = await _start_services(self)
        tls = " (TLS)" if self.config.server_tls() else ""
        log.info("bookie %s listening on %s%s", self.bookie_id, self.address, tls)

    async def _start_add_port(self) -> None:
        files = self.config.server_tls()
        tls = renewals = None
        if files is not None:
            tls = server_context(files, require_client_cert=self.config.tls_client_authentication)
            renewals = CertificateReloader(tls, files, interval_s=0)
        self._add_port = AddPort(self.bookie)
        try:
            port = await self._add_port.start(
                self.config.listen_address, self.config.bookie_add_port, tls, renewals
            )
        except OSError:
            if self._grpc is not None:
                await self._grpc.stop(None)
            await self.bookie.close()
            raise
        self.add_address = self.config.address_for(port)

    def _credentials(self) -> grpc.ServerCredentials | None:
        """TLS only when the bookie has a certificate; client certificates required with
        tls_client_authentication (the same registration address either way)."""
        files = self.config.server_tls()
        if files is None:
            return None
        return grpc_server_credentials(files, require_client_auth=self.config.tls_client_authentication)

    async def stop(self, grace_s: float = 2.0) -> None:
        """Stop serving, let in-flight requests finish (up to ``grace_s``), flush everything."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        loop = asyncio.get_running_loop()
        # What talks to the metadata store must be done by here, so the gRPC grace and the
        # journal's flush still fit in shutdown_timeout_ms.
        deadline = loop.time() + self.config.shutdown_timeout_ms / 1000 - grace_s - _FLUSH_RESERVE_S
        for service in reversed(self._services):
            await _stop_service(service, max(deadline - loop.time(), _MIN_STEP_S))
        if self._add_port is not None:
            await self._add_port.stop(grace_s)
        if self._grpc is not None:
            await self._grpc.stop(grace_s)
        try:
            await self.bookie.close()
        finally:
            self._stopped.set()
        log.info("bookie %s stopped", self.bookie_id)

    @property
    def stopping(self) -> bool:
        return self._stopping or self._stop_task is not None

    async def wait_stopped(self) -> None:
        """Return once the bookie has stopped and flushed everything."""
        await self._stopped.wait()

    def request_stop(self) -> None:
        """Ask for a shutdown from a callback (e.g. the disk monitor with read-only mode off)."""
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(self.stop())


class _Service(Protocol):
    async def stop(self) -> None: ...


#: of shutdown_timeout_ms, kept for the journal's flush and close after the services stop
_FLUSH_RESERVE_S = 2.0
#: the least each service is given, however late
_MIN_STEP_S = 0.2


async def _stop_service(service: _Service, timeout_s: float) -> None:
    """Stop ``service``, giving up after ``timeout_s``: registration and the store session wait on
    the metadata store, which may never answer. The step is cancelled, not awaited, since a
    cancelled step may itself wait on the store."""
    step = asyncio.ensure_future(service.stop())
    done, _ = await asyncio.wait({step}, timeout=timeout_s)
    if not done:
        step.cancel()
        log.warning(
            "shutdown: %s did not stop within %.1fs (metadata store unreachable?); going on without it",
            type(service).__name__.lstrip("_"),
            timeout_s,
        )
    elif not step.cancelled() and step.exception() is not None:
        log.warning("shutdown: %s failed to stop: %s", type(service).__name__.lstrip("_"), step.exception())


class _StoreSession:
    """Closes the metadata-store session last, after the services that use it."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def stop(self) -> None:
        await self.store.close()


async def _start_services(server: BookieServer) -> list[_Service]:
    """The disk monitor always; with a metadata store also registration and garbage collection."""
    config, bookie = server.config, server.bookie
    services: list[_Service] = []
    if config.metadata_service_uri:
        store = await open_store(config.metadata_service_uri, session_timeout_s=config.zk_timeout / 1000)
        services.append(_StoreSession(store))
        registration = Registration(
            store,
            BookieRegistration(
                server.bookie_id,
                server.address,
                config.rack or DEFAULT_RACK,
                add_address=server.add_address,
                ip=str(config.advertised_ip or ""),
            ),
            read_only=bookie.read_only,
        )
        await registration.start()
        bookie.on_read_only_change(registration.set_read_only)
        services.append(registration)
        collector = GarbageCollector(store, bookie.storage, config.gc_wait_time)
        collector.start()
        services.append(collector)
        if config.auto_recovery_daemon_enabled:
            server.recovery = AutoRecovery(store, server.bookie_id, config)
            server.recovery.start()
            services.append(server.recovery)
    monitor = DiskMonitor(bookie, on_full=server.request_stop)
    monitor.start()
    services.append(monitor)
    if config.enable_statistics:
        metrics = MetricsServer(
            bookie, server.recovery, config.listen_address, config.prometheus_stats_http_port
        )
        await metrics.start()
        server.metrics_port = metrics.port
        services.append(metrics)
    return services


async def start_bookie(config: BookieConfig) -> BookieServer:
    """Open storage (replaying the journal), bind, serve; returns the running server."""
    server = BookieServer(config)
    await server.start()
    return server
