"""Configuration of one bookie: BookKeeper's ``bk_server.conf`` settings in snake_case.

Defaults are BookKeeper's where the setting exists there (``bookiePort`` 3181,
``journalSyncData`` true, ``journalMaxGroupWaitMSec`` 2, ``journalBufferedWritesThreshold``
512 KiB, ``journalMaxSizeMB`` 2048, ``journalPreAllocSizeMB`` 16, ``entryLogSizeLimit`` 1 GiB,
``flushInterval`` 10 s, ``diskUsageThreshold`` 0.95, ``diskUsageLwmThreshold`` 0.90,
``diskCheckInterval`` 10 s, ``readOnlyModeEnabled`` true, ``gcWaitTime`` 15 min). Environment
variables are ``MAGNETAR_BOOKIE_<FIELD>``.
"""

from __future__ import annotations

from pydantic import Field, IPvAnyAddress, model_validator

from magnetar.common.config import ComponentConfig
from magnetar.common.grpc_tls import check_tls_files
from magnetar.common.tls import TlsFiles


class BookieConfig(ComponentConfig):
    env_prefix: str = "MAGNETAR_BOOKIE"

    #: gRPC port; 0 picks a free port (the bound one is printed on the "ready" line)
    bookie_port: int = Field(default=3181, ge=0, le=65535)
    #: port of the framed add path (BookKeeper's v3 shape, beside gRPC: ``bookie/frames.py``); 0
    #: picks a free port. Clients find it in the bookie's registration.
    bookie_add_port: int = Field(default=0, ge=0, le=65535)
    #: serve adds on ``bookie_add_port``; off: clients add over the gRPC stream
    framed_adds_enabled: bool = True
    #: interface the gRPC server binds to
    listen_address: str = "127.0.0.1"
    #: address clients use to reach this bookie; defaults to ``listen_address``
    advertised_address: str | None = None
    #: IP address clients connect to instead of resolving ``advertised_address``'s name, which
    #: stays what TLS checks (a pod's IP: a pod made again keeps its name at a new IP, and
    #: clients that read it from the registration reach it at once); none: clients resolve the name
    advertised_ip: IPvAnyAddress | None = None
    #: identity in the metadata store and in ledger ensembles; defaults to ``address:port``
    bookie_id: str | None = None
    journal_directory: str = "data/bookie/journal"
    ledger_directories: list[str] = Field(default_factory=lambda: ["data/bookie/ledgers"], min_length=1)
    #: fsync the journal before acknowledging an add (false: acknowledge once written)
    journal_sync_data: bool = True
    #: how long the journal waits to gather more records into one fsync
    journal_max_group_wait_msec: int = Field(default=2, ge=0)
    #: the journal writes at once, without waiting, once this many bytes are queued
    journal_buffered_writes_threshold: int = Field(default=512 * 1024, gt=0)
    #: a journal file is rolled over past this size
    journal_max_size_mb: int = Field(default=2048, gt=0)
    #: a journal file is extended with zeros this much at a time ahead of its records, so an
    #: fsync flushes data, not the file system's metadata (BookKeeper's journalPreAllocSizeMB)
    journal_pre_alloc_size_mb: int = Field(default=16, gt=0)
    #: an entry log file is rolled over past this size (bytes)
    entry_log_size_limit: int = Field(default=1024 * 1024 * 1024, gt=0)
    #: checkpoint interval (ms): flush entry logs, record the journal mark, drop old journals
    flush_interval: int = Field(default=10_000, gt=0)
    disk_usage_threshold: float = Field(default=0.95, gt=0, le=1)
    disk_usage_lwm_threshold: float = Field(default=0.90, gt=0, le=1)
    disk_check_interval: int = Field(default=10_000, gt=0)
    #: go read-only when disks fill up; when false the bookie shuts down instead
    read_only_mode_enabled: bool = True
    #: interval (ms) between garbage collections of deleted ledgers
    gc_wait_time: int = Field(default=900_000, gt=0)
    #: ``zk://host:port/chroot`` or ``memory://name``; none: no registration and no GC
    metadata_service_uri: str | None = None
    rack: str | None = None
    #: serve Prometheus /metrics (enableStatistics)
    enable_statistics: bool = True
    #: port of /metrics (prometheusStatsHttpPort); 0 picks a free one
    prometheus_stats_http_port: int = Field(default=8000, ge=0, le=65535)
    #: metadata-store session timeout (ms): how long a killed bookie stays registered (zkTimeout)
    zk_timeout: int = Field(default=10_000, gt=0)
    #: ms a SIGTERM may take: unregistering and closing the metadata-store session give up
    #: when it runs out (a store that does not answer), the journal's flush and close still run
    #: (Magnetar's own: BookKeeper has none; the broker's is brokerShutdownTimeoutMs)
    shutdown_timeout_ms: int = Field(default=10_000, ge=1_000)
    # -- auto-recovery (BookKeeper's AutoRecovery settings) ------------------------------------
    #: run the auditor election and a replication worker in this bookie
    auto_recovery_daemon_enabled: bool = True
    #: seconds a bookie may be gone before its ledgers are marked under-replicated, so that a
    #: restart does not start a re-replication storm (BookKeeper's default is 0)
    lost_bookie_recovery_delay: int = Field(default=30, ge=0)
    #: seconds between audits of every ledger (0: only on start and on request)
    auditor_periodic_check_interval: int = Field(default=604_800, ge=0)
    #: also read every entry from every replica during the periodic audit (costly)
    auditor_entry_level_check: bool = False
    #: bytes/s a replication worker copies at most (-1: unthrottled)
    replication_rate_by_bytes: int = -1
    #: ms an open ledger's last fragment may stay under-replicated before the worker fences and
    #: closes the ledger to recover it (its writer would have replaced the bookie by then)
    open_ledger_rereplication_grace_period: int = Field(default=30_000, ge=0)
    #: seconds between scans of the under-replication marks by an idle worker
    replication_worker_poll_interval: float = Field(default=1.0, gt=0)
    # -- TLS (BookKeeper's tlsCertificatePath, tlsKeyStore, tlsTrustStore as PEM files) ---------
    #: this bookie's certificate chain (PEM); set: the gRPC port serves TLS only, and this
    #: bookie's auto-recovery proves it to the other bookies as its client certificate
    tls_certificate_path: str = ""
    #: the key of ``tls_certificate_path`` (PEM)
    tls_key_path: str = ""
    #: the CAs trusted for clients' certificates and, for auto-recovery, other bookies' (PEM)
    tls_trust_store_path: str = ""
    #: tlsClientAuthentication: refuse every client whose certificate the trust store's CAs did
    #: not sign (a client without a certificate included)
    tls_client_authentication: bool = False

    @model_validator(mode="after")
    def _check_thresholds(self) -> BookieConfig:
        if self.disk_usage_lwm_threshold > self.disk_usage_threshold:
            raise ValueError(
                f"disk_usage_lwm_threshold ({self.disk_usage_lwm_threshold}) must not exceed "
                f"disk_usage_threshold ({self.disk_usage_threshold})"
            )
        return self

    @model_validator(mode="after")
    def _usable_tls(self) -> BookieConfig:
        """TLS settings that cannot work stop the bookie before it serves, naming them."""
        if self.tls_client_authentication and not (self.tls_certificate_path and self.tls_trust_store_path):
            raise ValueError(
                "tls_client_authentication needs tls_certificate_path (a TLS port) and "
                "tls_trust_store_path (the CAs that sign clients' certificates)"
            )
        check_tls_files(
            TlsFiles(self.tls_certificate_path, self.tls_key_path, self.tls_trust_store_path),
            certificate="tls_certificate_path",
            key="tls_key_path",
            trust_certs="tls_trust_store_path",
        )
        return self

    def server_tls(self) -> TlsFiles | None:
        """The files the gRPC port serves TLS with; None: plain text."""
        if not self.tls_certificate_path:
            return None
        return TlsFiles(self.tls_certificate_path, self.tls_key_path, self.tls_trust_store_path)

    def client_tls(self) -> TlsFiles | None:
        """Auto-recovery's TLS to the other bookies: on when this bookie serves TLS (the cluster's
        bookies agree), proving this bookie's own certificate."""
        return self.server_tls()

    def address_for(self, port: int) -> str:
        """``host:port`` clients connect to, once the bound port is known."""
        return f"{self.advertised_address or self.listen_address}:{port}"

    def id_for(self, port: int) -> str:
        return self.bookie_id or self.address_for(port)
