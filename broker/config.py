"""Configuration of one broker: Pulsar's ``broker.conf`` settings in snake_case, with Pulsar's
defaults where the setting exists there. Environment variables are ``MAGNETAR_BROKER_<FIELD>``."""

from __future__ import annotations

import json
import ssl
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from magnetar.admin.schema_strategies import SchemaStrategy
from magnetar.bookie.client import LedgerClientConfig
from magnetar.broker.managed_ledger import ManagedLedgerConfig
from magnetar.broker.policies.data import (
    AutoTopicCreationOverride,
    BacklogPolicy,
    BacklogQuota,
    DelayedDeliveryPolicies,
    DispatchRate,
    Policies,
)
from magnetar.common.authentication.client import ClientCredentials
from magnetar.common.authentication.providers import Authentication
from magnetar.common.config import ComponentConfig
from magnetar.common.grpc_tls import check_tls_files
from magnetar.common.tls import TlsFiles, server_context


class ServiceSettings(BaseModel):
    """The region, the metadata stores, the addresses and ports this broker serves on, and what its
    connections may carry."""

    #: the region this broker belongs to (clusterName)
    cluster_name: str = "standalone"
    #: local metadata store: zk://host:port/chroot, sqlite:///path, memory://name
    metadata_store_url: str = "memory://standalone"
    #: configuration store shared by geo-replicated regions (default: the local store)
    configuration_metadata_store_url: str | None = None
    #: session timeout of the metadata store (metadataStoreSessionTimeoutMillis): how long a
    #: crashed broker keeps its bundles and leadership before others take over
    metadata_store_session_timeout_millis: int = Field(default=30_000, gt=0)
    #: ms a SIGTERM may take (brokerShutdownTimeoutMs): past it the graceful steps (leaving the
    #: cluster, moving bundles away, closing topics) are given up, the metadata-store sessions
    #: closed without waiting for a store that does not answer, and the process exits. Pulsar's
    #: 60 s would use all of a pod's 60 s termination grace period; half of it leaves room.
    broker_shutdown_timeout_ms: int = Field(default=30_000, ge=1_000)
    bind_address: str = "127.0.0.1"
    advertised_address: str = "127.0.0.1"
    #: more addresses of this broker, by listener name (advertisedListeners):
    #: ``name:pulsar://host:port[,name:pulsar://host:port...]``; a lookup naming a listener
    #: (``advertised_listener_name``) is answered with that address
    advertised_listeners: str = ""
    #: how other regions reach this cluster (a load balancer or DNS name in front of its brokers;
    #: pulsar initialize-cluster-metadata's --broker-service-url); empty: this broker's own URL
    cluster_broker_service_url: str = ""
    #: the same for TLS (pulsar+ssl://, the cluster's brokerServiceUrlTls); empty: this broker's
    #: own TLS URL, if it has a TLS port
    cluster_broker_service_url_tls: str = ""
    #: Pulsar protocol port; 0 picks a free one (printed on the ready line)
    broker_service_port: int = Field(default=6650, ge=0, le=65535)
    #: HTTP port of /metrics (and the admin REST); 0 picks a free one
    web_service_port: int = Field(default=8080, ge=0, le=65535)
    #: /metrics has a line per topic in each family (exposeTopicLevelMetricsInPrometheus); off,
    #: one per namespace with its topics' values summed: a broker of 100,000 topics writes about
    #: 1.5 KB a topic at each scrape
    expose_topic_level_metrics_in_prometheus: bool = True
    #: largest message accepted (maxMessageSize, 5 MiB)
    max_message_size: int = Field(default=5 * 1024 * 1024, gt=0)
    keep_alive_interval_seconds: int = Field(default=30, gt=0)
    #: sends being written per connection before the broker stops reading from it
    #: (maxPendingPublishRequestsPerConnection): a fast producer cannot fill the broker's memory
    max_pending_publish_requests_per_connection: int = Field(default=1000, gt=0)
    #: topics being loaded at once (maxConcurrentTopicLoadRequest): the clients of a bundle that
    #: moved here load its topics side by side, this many at a time, the rest wait their turn
    max_concurrent_topic_load_request: int = Field(default=5000, gt=0)
    #: open connections the broker accepts in all (brokerMaxConnections); 0: no limit
    broker_max_connections: int = Field(default=0, ge=0)
    #: open connections the broker accepts from one IP address (brokerMaxConnectionsPerIp); 0: no limit
    broker_max_connections_per_ip: int = Field(default=0, ge=0)
    #: a topic still fenced (being handed over) after this many seconds is closed forcefully and
    #: its clients reconnect, so it is never stuck (topicFencingTimeoutSeconds; 0 never closes)
    topic_fencing_timeout_seconds: int = 0

    def listeners(self) -> dict[str, str]:
        """``advertised_listeners``' pulsar:// URLs as {name: URL}; ValueError naming a
        malformed entry."""
        return self._listeners("pulsar://")

    def listeners_tls(self) -> dict[str, str]:
        """``advertised_listeners``' pulsar+ssl:// URLs (a listener may have both, as in
        Pulsar: ``internal:pulsar://h:6650,internal:pulsar+ssl://h:6651``)."""
        return self._listeners("pulsar+ssl://")

    def listeners_web(self) -> dict[str, str]:
        """``advertised_listeners``' http:// URLs: where admin calls about what another broker
        owns are redirected for a client of that listener (Pulsar advertises only the binary
        protocol by listener; its admin redirects name the default address)."""
        return self._listeners("http://")

    def listeners_web_tls(self) -> dict[str, str]:
        """``advertised_listeners``' https:// URLs."""
        return self._listeners("https://")

    def listener_at(self, host: str, port: int) -> str | None:
        """The listener advertised at exactly ``host:port`` (the address a client connected to),
        like Pulsar's per-bind-address listener (PIP-95); None: the default listener. Addresses
        are compared as written, never resolved."""
        tables = (self.listeners(), self.listeners_tls(), self.listeners_web(), self.listeners_web_tls())
        for urls in tables:
            for name, url in urls.items():
                if url.partition("://")[2].rstrip("/") == f"{host}:{port}":
                    return name
        return None

    def _listeners(self, scheme: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for entry in filter(None, (e.strip() for e in self.advertised_listeners.split(","))):
            name, _, url = entry.partition(":")
            if not name or not url.startswith(("pulsar://", "pulsar+ssl://", "http://", "https://")):
                raise ValueError(
                    "advertised_listeners: expected name:pulsar://host:port, name:pulsar+ssl://host:port, "
                    f"name:http://host:port or name:https://host:port, got {entry!r}"
                )
            if url.startswith(scheme):
                found[name] = url
        return found


class SecuritySettings(BaseModel):
    """TLS on the broker's ports and its RPCs, authentication and authorization (Pulsar's settings;
    see docs/guides/security.md)."""

    #: brokerServicePortTls: the pulsar+ssl:// port (6651 in Pulsar's broker.conf); None: none
    broker_service_port_tls: int | None = Field(default=None, ge=0, le=65535)
    #: webServicePortTls: the https:// admin and lookup port (8443 in broker.conf); None: none
    web_service_port_tls: int | None = Field(default=None, ge=0, le=65535)
    #: the broker's certificate chain and key (PEM), served on both TLS ports and the broker RPCs
    tls_certificate_file_path: str = ""
    tls_key_file_path: str = ""
    #: the CAs whose client certificates are trusted (the TLS provider's roles come from them)
    tls_trust_certs_file_path: str = ""
    #: tlsRequireTrustedClientCertOnConnect: a client without a certificate the CAs signed is refused
    tls_require_trusted_client_cert_on_connect: bool = False
    #: tlsCertRefreshCheckDurationSec: how often renewed certificate files are loaded (0: never)
    tls_cert_refresh_check_duration_sec: int = Field(default=300, ge=0)
    #: brokerClientTlsEnabled: the broker RPCs (transfers, PIP-63 cursors) are TLS, on both
    #: sides: this broker serves them with tls_certificate_file_path/tls_key_file_path and
    #: refuses a caller whose certificate tls_trust_certs_file_path's CAs did not sign, and
    #: calls other brokers with the certificate below (set it on every broker of the cluster)
    broker_client_tls_enabled: bool = False
    broker_client_trust_certs_file_path: str = ""
    broker_client_certificate_file_path: str = ""
    broker_client_key_file_path: str = ""
    #: authenticationEnabled: every connection and admin call must say who it is
    authentication_enabled: bool = False
    #: authenticationProviders, comma-separated: token (or Pulsar's AuthenticationProviderToken)
    authentication_providers: str = ""
    #: tokenSecretKey (HS256) or tokenPublicKey (RS256/ES256): data:;base64,…, file:///path or a path
    token_secret_key: str = ""
    token_public_key: str = ""
    #: tokenAuthClaim: the claim naming the role
    token_auth_claim: str = "sub"
    #: anonymousUserRole: the role of a caller that sends no credentials (none: refused)
    anonymous_user_role: str = ""
    #: authenticationRefreshCheckSeconds: how often a connection's expiring credentials (a token's
    #: exp) are checked; once expired the client is challenged for fresh ones (AUTH_CHALLENGE) and
    #: disconnected if none come by the next check; 0: never checked
    authentication_refresh_check_seconds: float = Field(default=60, ge=0)
    #: basicAuthConf: the basic provider's htpasswd-style user:bcrypt-hash file (a path,
    #: file:///path or data:;base64,…)
    basic_auth_conf: str = ""
    #: authorizationEnabled / superUserRoles (comma-separated): what authenticated roles may do
    authorization_enabled: bool = False
    super_user_roles: str = ""
    #: brokerClientAuthenticationPlugin / brokerClientAuthenticationParameters: how this broker
    #: authenticates its own calls to brokers (admin forwarding, unloads, partition deletes)
    broker_client_authentication_plugin: str = ""
    broker_client_authentication_parameters: str = ""

    @field_validator("broker_client_authentication_parameters", mode="before")
    @classmethod
    def _parameters_as_text(cls, value: object) -> object:
        """Basic's parameters are JSON (``{"userId": …}``), which a YAML file or ``--set`` reads
        as a mapping: taken back as the JSON text the plugin expects."""
        return json.dumps(value) if isinstance(value, dict) else value

    def authentication(self) -> Authentication:
        """The broker's authentication; ValueError naming a setting that cannot be used."""
        return Authentication.from_settings(
            enabled=self.authentication_enabled,
            providers=[p.strip() for p in self.authentication_providers.split(",") if p.strip()],
            token_secret_key=self.token_secret_key,
            token_public_key=self.token_public_key,
            token_auth_claim=self.token_auth_claim,
            anonymous_user_role=self.anonymous_user_role,
            basic_auth_conf=self.basic_auth_conf,
        )

    def tls_files(self) -> TlsFiles:
        return TlsFiles(
            self.tls_certificate_file_path, self.tls_key_file_path, self.tls_trust_certs_file_path
        )

    def tls_server_context(self) -> ssl.SSLContext | None:
        """What the TLS ports serve with (None: no TLS port); TlsSettingsError naming the problem."""
        if self.broker_service_port_tls is None and self.web_service_port_tls is None:
            return None
        return server_context(
            self.tls_files(), require_client_cert=self.tls_require_trusted_client_cert_on_connect
        )

    def super_users(self) -> list[str]:
        return [r.strip() for r in self.super_user_roles.split(",") if r.strip()]

    def broker_client_credentials(self) -> ClientCredentials:
        return ClientCredentials.from_plugin(
            self.broker_client_authentication_plugin, self.broker_client_authentication_parameters
        )

    def broker_rpc_server_tls(self) -> TlsFiles | None:
        """What the broker RPC port serves with, client certificates required (None: plain text)."""
        if not self.broker_client_tls_enabled:
            return None
        return TlsFiles(
            self.tls_certificate_file_path, self.tls_key_file_path, self.tls_trust_certs_file_path
        )

    def broker_client_tls(self) -> TlsFiles | None:
        """How this broker calls other brokers' RPC ports (None: plain text)."""
        if not self.broker_client_tls_enabled:
            return None
        return TlsFiles(
            self.broker_client_certificate_file_path,
            self.broker_client_key_file_path,
            self.broker_client_trust_certs_file_path,
        )


class StorageSettings(BaseModel):
    """The ledger client's connection to the bookies and the managed ledgers over it
    (bookkeeper* and managedLedger* settings)."""

    #: bookkeeperTLSTrustCertsFilePath: the CAs bookies' certificates are checked against; set:
    #: the ledger client talks TLS to the bookies
    bookkeeper_tls_trust_certs_file_path: str = ""
    #: bookkeeperTLSClientAuthentication: prove the certificate below to the bookies (bookies
    #: with tls_client_authentication refuse a broker without one)
    bookkeeper_tls_client_authentication: bool = False
    bookkeeper_tls_certificate_file_path: str = ""
    bookkeeper_tls_key_file_path: str = ""
    #: rpc timeout of the ledger client (bookkeeperClientTimeoutInSeconds)
    bookkeeper_client_timeout_in_seconds: int = Field(default=30, gt=0)
    #: how often an idle writer sends its LAC explicitly (bookkeeperExplicitLacIntervalInMills;
    #: 0 disables, Pulsar's default): set it on writable brokers that read-only brokers tail, or
    #: the last entry before a pause stays invisible to them until the next one
    bookkeeper_explicit_lac_interval_in_mills: int = Field(default=0, ge=0)
    managed_ledger_default_ensemble_size: int = Field(default=2, ge=1)
    managed_ledger_default_write_quorum: int = Field(default=2, ge=1)
    managed_ledger_default_ack_quorum: int = Field(default=2, ge=1)
    managed_ledger_max_entries_per_ledger: int = Field(default=50_000, ge=1)
    managed_ledger_min_ledger_rollover_time_minutes: float = Field(default=10, ge=0)
    managed_ledger_max_ledger_rollover_time_minutes: float = Field(default=240, ge=0)
    managed_ledger_max_size_per_ledger_mbytes: int = Field(default=2048, ge=1)
    managed_ledger_cache_size_mb: int = Field(default=64, ge=0)
    #: a cursor ledger (a durable cursor's acknowledgements) is replaced at this many entries ...
    managed_ledger_cursor_max_entries_per_ledger: int = Field(default=50_000, ge=1)
    #: ... or at this age (0: no age limit)
    managed_ledger_cursor_rollover_time_in_seconds: float = Field(default=14_400, ge=0)
    default_retention_time_in_minutes: float = 0
    default_retention_size_in_mb: float = 0

    def bookkeeper_tls(self) -> TlsFiles | None:
        """The ledger client's TLS to the bookies (None: plain text); the broker's certificate is
        proved only with bookkeeper_tls_client_authentication, as in Pulsar."""
        if not self.bookkeeper_tls_trust_certs_file_path:
            return None
        if not self.bookkeeper_tls_client_authentication:
            return TlsFiles(trust_certs=self.bookkeeper_tls_trust_certs_file_path)
        return TlsFiles(
            self.bookkeeper_tls_certificate_file_path,
            self.bookkeeper_tls_key_file_path,
            self.bookkeeper_tls_trust_certs_file_path,
        )

    def ledger_client(self) -> LedgerClientConfig:
        return LedgerClientConfig(
            ensemble_size=self.managed_ledger_default_ensemble_size,
            write_quorum=self.managed_ledger_default_write_quorum,
            ack_quorum=self.managed_ledger_default_ack_quorum,
            rpc_timeout_s=self.bookkeeper_client_timeout_in_seconds,
            explicit_lac_interval_s=self.bookkeeper_explicit_lac_interval_in_mills / 1000,
            tls=self.bookkeeper_tls(),
        )

    def managed_ledger(self) -> ManagedLedgerConfig:
        return ManagedLedgerConfig(
            ensemble_size=self.managed_ledger_default_ensemble_size,
            write_quorum=self.managed_ledger_default_write_quorum,
            ack_quorum=self.managed_ledger_default_ack_quorum,
            max_entries_per_ledger=self.managed_ledger_max_entries_per_ledger,
            min_ledger_rollover_time_minutes=self.managed_ledger_min_ledger_rollover_time_minutes,
            max_ledger_rollover_time_minutes=self.managed_ledger_max_ledger_rollover_time_minutes,
            max_size_per_ledger_mb=self.managed_ledger_max_size_per_ledger_mbytes,
            cache_size_mb=self.managed_ledger_cache_size_mb,
            cursor_max_entries_per_ledger=self.managed_ledger_cursor_max_entries_per_ledger,
            cursor_rollover_time_seconds=self.managed_ledger_cursor_rollover_time_in_seconds,
            retention_time_minutes=self.default_retention_time_in_minutes,
            retention_size_mb=self.default_retention_size_in_mb,
        )


class TopicPolicyDefaults(BaseModel):
    """The broker's defaults of topic policies: a namespace's or a topic's own setting wins."""

    broker_deduplication_enabled: bool = False
    #: ttlDurationDefaultInSeconds: unacknowledged messages older than this are expired (0: never)
    ttl_duration_default_in_seconds: int = Field(default=0, ge=0)
    #: messageExpiryCheckIntervalInMinutes: how often TTLs are enforced (fractions allowed)
    message_expiry_check_interval_in_minutes: float = Field(default=5, gt=0)
    #: backlogQuotaDefaultLimitBytes (-1: no quota) and backlogQuotaDefaultRetentionPolicy
    backlog_quota_default_limit_bytes: int = Field(default=-1, ge=-1)
    backlog_quota_default_retention_policy: BacklogPolicy = "producer_request_hold"
    #: backlogQuotaCheckEnabled / backlogQuotaCheckIntervalInSeconds: producers of a topic over
    #: its quota are disconnected (hold, exception) or its slowest subscriptions skipped (eviction)
    backlog_quota_check_enabled: bool = True
    backlog_quota_check_interval_in_seconds: float = Field(default=60, gt=0)
    #: maxProducersPerTopic / maxConsumersPerTopic (0: no limit)
    max_producers_per_topic: int = Field(default=0, ge=0)
    max_consumers_per_topic: int = Field(default=0, ge=0)
    #: dispatchThrottlingRatePerTopicInMsg / InByte (0: no limit)
    dispatch_throttling_rate_per_topic_in_msg: int = Field(default=0, ge=0)
    dispatch_throttling_rate_per_topic_in_byte: int = Field(default=0, ge=0)
    #: allowAutoTopicCreation / allowAutoTopicCreationType / defaultNumPartitions: whether a
    #: topic a client uses before anyone created it comes into being, and as what (a namespace's
    #: autoTopicCreation override wins)
    allow_auto_topic_creation: bool = True
    allow_auto_topic_creation_type: Literal["non-partitioned", "partitioned"] = "non-partitioned"
    default_num_partitions: int = Field(default=1, ge=1)
    #: enableNonPersistentTopics: whether non-persistent:// topics may be used on this broker
    enable_non_persistent_topics: bool = True
    #: delayedDeliveryEnabled: messages with a delivery time are held back until it comes
    delayed_delivery_enabled: bool = True
    #: schemaCompatibilityStrategy: which schemas may follow a topic's (a namespace's or topic's
    #: own wins); BACKWARD, the compatibility users expect by default (Pulsar's broker.conf says FULL)
    schema_compatibility_strategy: SchemaStrategy = "BACKWARD"
    #: isAllowAutoUpdateSchemaEnabled: producers may register new schemas (else only the admin API)
    is_allow_auto_update_schema_enabled: bool = True
    #: schemaValidationEnforced: a producer without a schema is refused on a topic with one
    schema_validation_enforced: bool = False
    #: brokerServiceCompactionThresholdInBytes: a topic with more bytes than this after its last
    #: compaction is compacted (0: only when asked); checked every
    #: brokerServiceCompactionMonitorIntervalInSeconds
    broker_service_compaction_threshold_in_bytes: int = Field(default=0, ge=0)
    broker_service_compaction_monitor_interval_in_seconds: float = Field(default=60, gt=0)
    #: Magnetar: how often loaded topics re-read their namespace's policies
    topic_policies_check_interval_seconds: float = Field(default=2.0, gt=0)

    def auto_topic_creation(self) -> AutoTopicCreationOverride:
        return AutoTopicCreationOverride(
            allowAutoTopicCreation=self.allow_auto_topic_creation,
            topicType=self.allow_auto_topic_creation_type,
            defaultNumPartitions=self.default_num_partitions,
        )

    def topic_policy_defaults(self) -> Policies:
        """The broker's topic policies (retention stays the managed ledgers' own default)."""
        return Policies(
            messageTTL=self.ttl_duration_default_in_seconds,
            backlogQuota=BacklogQuota(
                limitSize=self.backlog_quota_default_limit_bytes,
                policy=self.backlog_quota_default_retention_policy,
            ),
            maxProducers=self.max_producers_per_topic,
            maxConsumers=self.max_consumers_per_topic,
            dispatchRate=DispatchRate(
                dispatchThrottlingRateInMsg=self.dispatch_throttling_rate_per_topic_in_msg,
                dispatchThrottlingRateInByte=self.dispatch_throttling_rate_per_topic_in_byte,
            ),
            delayedDelivery=DelayedDeliveryPolicies(active=self.delayed_delivery_enabled),
            schemaCompatibilityStrategy=self.schema_compatibility_strategy,
            isAllowAutoUpdateSchema=self.is_allow_auto_update_schema_enabled,
            schemaValidationEnforced=self.schema_validation_enforced,
            compactionThreshold=self.broker_service_compaction_threshold_in_bytes,
        )


class ReplicationSettings(BaseModel):
    """Geo-replication and PIP-33 replicated subscriptions (see docs/guides/geo-replication.md)."""

    #: the listener other regions' replicators look this cluster's brokers up under
    #: (the cluster's listenerName); empty: their service URLs
    replication_listener_name: str = ""
    #: the listener this broker's replicators ask remote clusters' brokers for, instead of each
    #: remote cluster's listenerName (a local cluster gives every pair of regions its own link
    #: proxy, so the chaos lab can cut one direction of one pair); empty: the cluster's
    replication_outbound_listener_name: str = ""
    #: sends a replicator has in flight to its remote cluster (replicationProducerQueueSize)
    replication_producer_queue_size: int = Field(default=1000, gt=0)
    #: Magnetar: how often loaded topics check their namespace's clusters (set-clusters)
    replication_policy_check_interval_seconds: float = Field(default=2.0, gt=0)
    #: PIP-33: how often a topic with replicated subscriptions takes a snapshot
    replicated_subscriptions_snapshot_frequency_millis: int = Field(default=1000, gt=0)
    #: PIP-33: a snapshot not complete after this long is abandoned
    replicated_subscriptions_snapshot_timeout_seconds: int = Field(default=30, gt=0)
    #: PIP-33: snapshots kept per subscription
    replicated_subscriptions_snapshot_max_cached_per_subscription: int = Field(default=10, gt=0)
    #: Magnetar, beyond PIP-33 (a): updates also name the messages acknowledged past the
    #: snapshot point, so a consumer failing over does not get them again (off: Pulsar's way)
    replicated_subscriptions_carry_individual_acks: bool = False
    #: Magnetar, beyond PIP-33 (b): a snapshot waiting for a region just removed from the
    #: namespace is dropped and the next one asks the remaining regions only (off: it waits for
    #: its timeout, replicated_subscriptions_snapshot_timeout_seconds)
    replicated_subscriptions_resume_without_removed_clusters: bool = True


class ReadOnlyPoolSettings(BaseModel):
    """Read-only topic ownership (PIP-63; see docs/guides/read-only-pool.md)."""

    #: serve consumers only, for bundles owned writable elsewhere (``magnetar broker --read-only``):
    #: registers in the read-only pool, owns bundles read-only among the pool, rejects producers
    read_only_broker: bool = False
    #: service URL producers are sent to in a read-only broker's error (default: the topic's
    #: writable owner, else the cluster's broker service URL)
    writable_broker_service_url: str | None = None
    #: writable brokers: gRPC port of the cursor RPCs read-only brokers forward subscribe, ack,
    #: unsubscribe and seek to; 0 picks a free one (advertised in the broker registry)
    broker_cursor_rpc_port: int = Field(default=0, ge=0, le=65535)
    #: read-only brokers: how a ledger roll of the writable owner is noticed: ``poll`` re-reads
    #: the managed-ledger metadata when the LAC has not moved for the interval below (PIP-63
    #: option C), ``watch`` sets a metadata-store watch on it (option A)
    read_only_ledger_roll_detection: Literal["poll", "watch"] = "poll"
    #: read-only brokers: LAC long-poll timeout, after which the metadata is polled (``poll``)
    read_only_metadata_poll_interval_millis: int = Field(default=1000, gt=0)


class LoadBalancerSettings(BaseModel):
    """The load manager (loadBalancer* settings; see broker/loadbalance/load_manager.py)."""

    load_balancer_enabled: bool = True
    load_balancer_shedding_enabled: bool = True
    #: how often brokers publish their load report
    load_balancer_report_update_min_interval_millis: int = Field(default=5000, gt=0)
    #: how often the leader sheds and splits (minutes; fractions allowed)
    load_balancer_shedding_interval_minutes: float = Field(default=1, gt=0)
    #: a bundle shed is not shed again within this period
    load_balancer_shedding_grace_period_minutes: float = Field(default=30, ge=0)
    #: ThresholdShedder: points above the average usage at which a broker sheds
    load_balancer_broker_threshold_shedder_percentage: int = Field(default=10, ge=0, le=100)
    #: ThresholdShedder: weight of the previous usage when smoothing a broker's usage
    load_balancer_history_resource_percentage: float = Field(default=0.9, ge=0, le=1)
    load_balancer_cpu_resource_weight: float = Field(default=1.0, ge=0)
    load_balancer_memory_resource_weight: float = Field(default=1.0, ge=0)
    load_balancer_bandwidth_in_resource_weight: float = Field(default=1.0, ge=0)
    load_balancer_bandwidth_out_resource_weight: float = Field(default=1.0, ge=0)
    #: MB/s: a broker whose excess is less throughput than this sheds nothing
    load_balancer_bundle_unload_min_throughput_threshold: float = Field(default=10.0, ge=0)
    #: placement skips brokers whose usage is above this percentage
    load_balancer_broker_overloaded_threshold_percentage: int = Field(default=85, ge=0, le=100)
    #: link speed for bandwidth usage; unset: bandwidth is not counted (no NIC on loopback)
    load_balancer_override_broker_nic_speed_gbps: float | None = Field(default=None, gt=0)
    #: shed bundles are transferred (clients told where to go), not merely unloaded
    load_balancer_transfer_enabled: bool = True
    load_balancer_auto_bundle_split_enabled: bool = True
    #: the halves of a bundle the leader split are unloaded, so they may land on other brokers
    load_balancer_auto_unload_split_bundles_enabled: bool = True
    load_balancer_namespace_bundle_max_topics: int = Field(default=1000, gt=0)
    #: producers + consumers; -1 disables the check
    load_balancer_namespace_bundle_max_sessions: int = 1000
    #: msg/s in + out
    load_balancer_namespace_bundle_max_msg_rate: int = Field(default=30000, gt=0)
    #: MB/s in + out
    load_balancer_namespace_bundle_max_bandwidth_mbytes: int = Field(default=100, gt=0)
    load_balancer_namespace_maximum_bundles: int = Field(default=128, gt=0)
    #: Magnetar, tests only: accept PUT /admin/v2/internal/load to override the reported usage
    load_balancer_load_injection_enabled: bool = False


# pydantic orders a model's fields from its last base to its first, so the bases are listed
# last-first: the settings reference reads service, security, storage, topic defaults,
# replication, the read-only pool, then the load manager.
class BrokerConfig(
    LoadBalancerSettings,
    ReadOnlyPoolSettings,
    ReplicationSettings,
    TopicPolicyDefaults,
    StorageSettings,
    SecuritySettings,
    ServiceSettings,
    ComponentConfig,
):
    env_prefix: str = "MAGNETAR_BROKER"

    @model_validator(mode="after")
    def _usable_authentication(self) -> BrokerConfig:
        """Authentication settings that cannot work stop the broker before it serves, naming them."""
        self.authentication()
        self.broker_client_credentials()
        self.tls_server_context()
        if self.authorization_enabled and not self.authentication_enabled:
            raise ValueError("authorization_enabled needs authentication_enabled (roles come from it)")
        return self

    @model_validator(mode="after")
    def _usable_grpc_tls(self) -> BrokerConfig:
        """The gRPC channels' TLS settings: one that cannot work stops the broker at start, naming
        the setting and the file, rather than failing every handshake later."""
        if not self.bookkeeper_tls_trust_certs_file_path and (
            self.bookkeeper_tls_client_authentication or self.bookkeeper_tls_certificate_file_path
        ):
            raise ValueError(
                "TLS to bookies is on when bookkeeper_tls_trust_certs_file_path is set: set it too"
            )
        if self.bookkeeper_tls_client_authentication and not self.bookkeeper_tls_certificate_file_path:
            raise ValueError(
                "bookkeeper_tls_client_authentication needs bookkeeper_tls_certificate_file_path "
                "and bookkeeper_tls_key_file_path"
            )
        check_tls_files(
            TlsFiles(
                self.bookkeeper_tls_certificate_file_path,
                self.bookkeeper_tls_key_file_path,
                self.bookkeeper_tls_trust_certs_file_path,
            ),
            certificate="bookkeeper_tls_certificate_file_path",
            key="bookkeeper_tls_key_file_path",
            trust_certs="bookkeeper_tls_trust_certs_file_path",
        )
        if self.broker_client_tls_enabled:
            self._check_broker_rpc_tls()
        return self

    def _check_broker_rpc_tls(self) -> None:
        # Both sides are needed: every broker serves the RPCs and calls the others'.
        needed = {
            "tls_certificate_file_path": self.tls_certificate_file_path,
            "tls_key_file_path": self.tls_key_file_path,
            "tls_trust_certs_file_path": self.tls_trust_certs_file_path,
            "broker_client_trust_certs_file_path": self.broker_client_trust_certs_file_path,
            "broker_client_certificate_file_path": self.broker_client_certificate_file_path,
            "broker_client_key_file_path": self.broker_client_key_file_path,
        }
        missing = [name for name, path in needed.items() if not path]
        if missing:
            raise ValueError(
                f"broker_client_tls_enabled (mutual TLS on the broker RPCs) needs {', '.join(missing)}"
            )
        check_tls_files(
            TlsFiles(self.tls_certificate_file_path, self.tls_key_file_path, self.tls_trust_certs_file_path),
            certificate="tls_certificate_file_path",
            key="tls_key_file_path",
            trust_certs="tls_trust_certs_file_path",
        )
        check_tls_files(
            self.broker_client_tls() or TlsFiles(),
            certificate="broker_client_certificate_file_path",
            key="broker_client_key_file_path",
            trust_certs="broker_client_trust_certs_file_path",
        )
