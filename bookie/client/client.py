"""``LedgerClient``: create, open (with or without recovery) and delete ledgers.

store = await open_store("zk://127.0.0.1:2181/magnetar")
async with LedgerClient(store, LedgerClientConfig(ensemble_size=3, write_quorum=2, ack_quorum=2)) as bk:
    writer = await bk.create_ledger()
    await writer.add_entry(b"hello")
    await writer.close()
    reader = await bk.open_ledger(writer.ledger_id)
    entries = await reader.read(0, reader.last_add_confirmed)
"""

from __future__ import annotations

import secrets
import ssl

from pydantic import BaseModel, ConfigDict, Field, model_validator

from magnetar.bookie.client.bookie_connection import BookieConnectionPool
from magnetar.bookie.client.ensemble import BookieDirectory, EnsemblePlacement
from magnetar.bookie.client.ledger_handle import LedgerHandle
from magnetar.bookie.client.ledger_manager import LedgerManager
from magnetar.bookie.client.ledger_metadata import LedgerMetadata
from magnetar.bookie.client.read_handle import ReadHandle
from magnetar.bookie.client.recovery import LedgerRecovery
from magnetar.common.grpc_tls import grpc_channel_credentials
from magnetar.common.metadata.store import MetadataStore
from magnetar.common.tls import TlsFiles, client_context


class LedgerClientConfig(BaseModel):
    """Client settings; defaults are Pulsar's managedLedgerDefault* (E/Qw/Qa 2/2/2)."""

    model_config = ConfigDict(extra="forbid")

    ensemble_size: int = Field(2, ge=1)
    write_quorum: int = Field(2, ge=1)
    ack_quorum: int = Field(2, ge=1)
    #: deadline of a unary bookie RPC (reads, fencing, LAC), as bookkeeperClientTimeoutInSeconds
    rpc_timeout_s: float = Field(30.0, gt=0)
    #: how long a replacement bookie may take to connect before another is chosen, as
    #: BookKeeper's clientConnectTimeoutMillis
    connect_timeout_s: float = Field(10.0, gt=0)
    #: how often a writer sends its LAC explicitly while idle; 0 disables (BookKeeper's explicitLacInterval)
    explicit_lac_interval_s: float = Field(0.0, ge=0)
    #: entries a range read fetches at once
    read_concurrency: int = Field(64, ge=1)
    #: how long a new ledger, or an ensemble change with no writable replacement, waits for
    #: bookies to register before NotEnoughBookies (Magnetar): bookies whose sessions expired
    #: with the broker's, in a metadata-store outage, register again moments after the store
    #: returns, and a topic loading (or writing) then should not fail for that
    new_ensemble_wait_s: float = Field(2.0, ge=0)
    #: TLS to the bookies: their certificates checked against ``trust_certs``, and this client's
    #: certificate proved to them when one is given; None: plain-text channels
    tls: TlsFiles | None = None
    #: add over a bookie's framed add port where its registration names one (BookKeeper's v3
    #: frames, a fraction of gRPC's CPU per request); off: over gRPC's AddEntries stream
    framed_adds: bool = True

    @model_validator(mode="after")
    def _quorums(self) -> LedgerClientConfig:
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum:
            raise ValueError(
                f"need ensemble_size >= write_quorum >= ack_quorum, got "
                f"{self.ensemble_size}/{self.write_quorum}/{self.ack_quorum}"
            )
        return self


class LedgerClient:
    def __init__(self, store: MetadataStore, config: LedgerClientConfig | None = None) -> None:
        self.config = config or LedgerClientConfig()
        self.store = store
        self.directory = BookieDirectory(store)
        #: ledger metadata with compare-and-set (what auto-recovery rewrites ensembles through)
        self.manager = LedgerManager(store)
        #: choice of bookies for new and replacement ensembles
        self.placement = EnsemblePlacement(self.directory, replacement_wait_s=self.config.new_ensemble_wait_s)
        #: one gRPC connection per bookie, shared by every handle of this client
        self.pool = BookieConnectionPool(
            self.directory.address,
            rpc_timeout_s=self.config.rpc_timeout_s,
            connect_timeout_s=self.config.connect_timeout_s,
            # Read once, here: an unusable file fails the client's construction, not each add.
            credentials=grpc_channel_credentials(self.config.tls) if self.config.tls else None,
            add_port_tls=_add_port_tls(self.config.tls),
            # Each connection follows its bookie's registration: a bookie made again at a new
            # address (a pod's new IP) is reached there at once.
            locate=self.directory.registration,
            framed_adds=self.config.framed_adds,
        )

    async def start(self) -> None:
        """Read the bookies' registrations once, as BookKeeper's client does when it is made: a
        writer short of replacements then knows which bookies may come back to be one."""
        await self.directory.read_all()

    async def __aenter__(self) -> LedgerClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def create_ledger(
        self,
        ensemble_size: int | None = None,
        write_quorum: int | None = None,
        ack_quorum: int | None = None,
        *,
        custom: dict[str, str] | None = None,
        password: bytes | None = None,
    ) -> LedgerHandle:
        """A new ledger, open for writing. Its master key is derived from ``password``; without
        one a random password is chosen (and kept in the ledger metadata, where recovery finds
        it), so no caller of a bookie's port can guess the key."""
        e = ensemble_size or self.config.ensemble_size
        qw = write_quorum or min(self.config.write_quorum, e)
        ensemble = await self.placement.new_ensemble(
            e, write_quorum=qw, wait_s=self.config.new_ensemble_wait_s
        )
        metadata = LedgerMetadata(
            ensemble_size=e,
            write_quorum=qw,
            ack_quorum=ack_quorum or min(self.config.ack_quorum, e),
            ensembles=((0, ensemble),),
            custom=dict(custom or {}),
            password=secrets.token_bytes(16) if password is None else password,
        )
        ledger_id = await self.manager.new_ledger_id()
        versioned = await self.manager.create(ledger_id, metadata)
        handle = LedgerHandle(
            ledger_id,
            versioned,
            manager=self.manager,
            pool=self.pool,
            placement=self.placement,
            explicit_lac_interval_s=self.config.explicit_lac_interval_s,
        )
        await handle.start()
        return handle

    async def open_ledger(self, ledger_id: int) -> ReadHandle:
        """Open for reading after recovery: fences any writer and closes the ledger where it ends."""
        metadata = await LedgerRecovery(
            ledger_id, manager=self.manager, pool=self.pool, placement=self.placement
        ).run()
        return self._read_handle(ledger_id, metadata)

    async def open_ledger_no_recovery(self, ledger_id: int) -> ReadHandle:
        """Open without disturbing the writer: reads are bounded by the LAC (tailing readers)."""
        metadata = (await self.manager.read(ledger_id)).metadata
        handle = self._read_handle(ledger_id, metadata)
        if not handle.is_closed:
            await handle.read_lac()
        return handle

    async def ledger_metadata(self, ledger_id: int) -> LedgerMetadata:
        return (await self.manager.read(ledger_id)).metadata

    async def delete_ledger(self, ledger_id: int) -> None:
        """Remove the ledger's metadata; bookies reclaim its entries at their next garbage collection."""
        await self.manager.delete(ledger_id)

    async def ledger_ids(self) -> list[int]:
        return await self.manager.ledger_ids()

    async def close(self) -> None:
        self.directory.close()
        await self.pool.close()

    def _read_handle(self, ledger_id: int, metadata: LedgerMetadata) -> ReadHandle:
        return ReadHandle(
            ledger_id,
            metadata,
            manager=self.manager,
            pool=self.pool,
            read_concurrency=self.config.read_concurrency,
        )


def _add_port_tls(files: TlsFiles | None) -> ssl.SSLContext | None:
    """The add port's TLS, checked as the gRPC channel's is: the bookie's certificate against the
    trust store and its name; this client's certificate proved when there is one."""
    if files is None:
        return None
    return client_context(
        files.trust_certs, certificate=files.certificate, key=files.key, verify_hostname=True
    )
