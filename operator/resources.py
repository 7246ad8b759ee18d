"""The specs of the custom resources, typed: what the operator reads from ``MagnetarCluster``,
``MagnetarNamespace`` and ``MagnetarBundle`` objects.

The API server already enforces the schema of ``charts/magnetar/crds/`` at admission (types, ranges,
required fields, and CEL rules: E >= Qw >= Qa, enough bookies for an ensemble, an odd ZooKeeper
count, quantities, ZooKeeper URLs). These models check the same again — for objects stored before
those rules, kept agreeing by ``tests/operator/test_admission.py`` — plus what no schema can (the
settings the components know, in validation.py); a refusal is a :class:`SpecError`, which the
handlers turn into conditions and Events, never a crash loop.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from kubernetes.utils import quantity
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

GROUP = "magnetar.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CLUSTERS = "magnetarclusters"
NAMESPACES = "magnetarnamespaces"
BUNDLES = "magnetarbundles"

_BUNDLE = re.compile(r"^0x([0-9a-fA-F]{8})_0x([0-9a-fA-F]{8})$")
#: a Kubernetes object name (DNS subdomain): what a resource names its MagnetarCluster by
_OBJECT_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
#: a Secret another resource names: NAME (of the resource's namespace) or NAMESPACE/NAME
_SECRET_REF = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
#: what the pods' metadata stores open (magnetar.common.metadata.open_store), the same pattern as
#: the CRD's rule: memory: and sqlite: live in one process, and Pulsar's zk:host:port is not read
_ZK_URL = re.compile(r"^zk://[^/,:@ ]+(:[0-9]{1,5})?(,[^/,:@ ]+(:[0-9]{1,5})?)*(/[^ ]*)?$")


class SpecError(ValueError):
    """A spec the schema accepts but the operator cannot carry out; the message says why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _Spec(BaseModel):
    # Unknown fields were already pruned by the API server; ignore rather than fail on them.
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


#: Kubernetes' resource.Quantity (``1Gi``, ``500m``, ``2``, ``1e3``)
_QUANTITY = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$")


def _amount(value: str) -> Decimal:
    amount: Decimal = quantity.parse_quantity(value)  # type: ignore[no-untyped-call]
    return amount


def _quantity(value: str) -> str:
    if not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (such as 1Gi, 500m or 2)")
    if _amount(value) < 0:
        raise ValueError(f"{value!r} is not a non-negative Kubernetes quantity")
    return value


def _size(value: str) -> str:
    if _quantity(value) and _amount(value) <= 0:
        raise ValueError(f"{value!r} is not a positive Kubernetes quantity (a size such as 1Gi or 500Mi)")
    return value


#: a resource request or limit (the CRD: isQuantity and not below 0)
Quantity = Annotated[str, AfterValidator(_quantity)]
#: a volume's size (the CRD: isQuantity and above 0, as a PersistentVolumeClaim needs)
Size = Annotated[str, AfterValidator(_size)]


def _zk_url(value: str | None) -> str | None:
    if value is not None and not _ZK_URL.match(value):
        raise ValueError(
            f"{value!r} is not a ZooKeeper URL the pods can use: expected zk://host:port[,host:port...][/chroot]"
        )
    return value


StoreUrl = Annotated[str | None, AfterValidator(_zk_url)]


class Resources(_Spec):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _requests_within_limits(self) -> Resources:
        for key, request in self.requests.items():
            limit = self.limits.get(key)
            if limit is not None and _amount(request) > _amount(limit):
                raise ValueError(
                    f"resources.requests.{key}={request} is above resources.limits.{key}={limit} "
                    "(Kubernetes refuses such a pod)"
                )
        return self

    def render(self) -> dict[str, Any]:
        return {k: v for k, v in (("requests", self.requests), ("limits", self.limits)) if v}


def _odd(value: int) -> int:
    if value % 2 == 0:
        raise ValueError(f"ZooKeeper needs an odd number of servers (1, 3, 5 or 7), not {value}")
    return value


#: the keys of a Kubernetes ``Affinity``
_AFFINITY_KINDS = ("nodeAffinity", "podAffinity", "podAntiAffinity")
_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")


def _affinity(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """The checks the CRD's schema makes of an ``affinity`` (the pod spec's own field)."""
    if value is None:
        return None
    for kind, rules in value.items():
        if kind not in _AFFINITY_KINDS:
            raise ValueError(
                f"affinity.{kind} is not a kind of affinity: expected one of {', '.join(_AFFINITY_KINDS)}"
            )
        if not isinstance(rules, dict):
            raise ValueError(f"affinity.{kind} must be an object")
        if kind == "nodeAffinity":
            continue
        for i, term in enumerate(rules.get("requiredDuringSchedulingIgnoredDuringExecution") or []):
            _term(term, f"affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        for i, weighted in enumerate(rules.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            where = f"affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            weight = weighted.get("weight") if isinstance(weighted, dict) else None
            if not isinstance(weight, int) or not 1 <= weight <= 100:
                raise ValueError(f"{where}.weight must be an integer from 1 to 100, not {weight!r}")
            _term(weighted.get("podAffinityTerm"), f"{where}.podAffinityTerm")
    return value


def _term(term: Any, where: str) -> None:
    if not isinstance(term, dict) or not term.get("topologyKey"):
        raise ValueError(f"{where}.topologyKey is required (a node label, such as kubernetes.io/hostname)")


def _spread(value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The checks the CRD's schema makes of ``topologySpreadConstraints``."""
    for i, constraint in enumerate(value or []):
        where = f"topologySpreadConstraints[{i}]"
        if not isinstance(constraint, dict):
            raise ValueError(f"{where} must be an object (maxSkew, topologyKey, whenUnsatisfiable)")
        skew = constraint.get("maxSkew")
        if not isinstance(skew, int) or skew < 1:
            raise ValueError(f"{where}.maxSkew must be an integer of at least 1, not {skew!r}")
        if not constraint.get("topologyKey"):
            raise ValueError(
                f"{where}.topologyKey is required (a node label, such as topology.kubernetes.io/zone)"
            )
        if constraint.get("whenUnsatisfiable") not in _WHEN_UNSATISFIABLE:
            raise ValueError(
                f"{where}.whenUnsatisfiable must be DoNotSchedule or ScheduleAnyway, "
                f"not {constraint.get('whenUnsatisfiable')!r}"
            )
    return value


class Placement(_Spec):
    """Where a component's pods may run: the pod spec's own fields. Unset, the operator's defaults
    apply (manifests.placement): soft anti-affinity by host and a soft spread over zones; given,
    they replace the defaults."""

    affinity: Annotated[dict[str, Any] | None, AfterValidator(_affinity)] = None
    topology_spread_constraints: Annotated[list[dict[str, Any]] | None, AfterValidator(_spread)] = Field(
        default=None, alias="topologySpreadConstraints"
    )


class ZooKeeperSpec(Placement):
    replicas: Annotated[int, AfterValidator(_odd)] = Field(default=1, ge=1, le=7)
    image: str = "zookeeper:3.9"
    storage: Size = "1Gi"
    resources: Resources = Field(default_factory=Resources)


class MetadataStoreSpec(_Spec):
    #: an external store (``zk://host:port/chroot``); none: the operator runs ZooKeeper
    url: StoreUrl = None
    zookeeper: ZooKeeperSpec = Field(default_factory=ZooKeeperSpec)


class ConfigurationStoreSpec(_Spec):
    #: the store shared by geo-replicated regions; none: the region's own metadata store
    url: StoreUrl = None


class BookieStorage(_Spec):
    journal: Size = "1Gi"
    ledgers: Size = "5Gi"
    storage_class_name: str | None = Field(default=None, alias="storageClassName")


#: the node label a bookie's rack is read from by default (a zone: losing one loses no ledger)
ZONE_LABEL = "topology.kubernetes.io/zone"


class BookiesSpec(Placement):
    replicas: int = Field(default=3, ge=0)
    storage: BookieStorage = Field(default_factory=BookieStorage)
    ensemble_size: int = Field(default=2, ge=1, alias="ensembleSize")
    write_quorum: int = Field(default=2, ge=1, alias="writeQuorum")
    ack_quorum: int = Field(default=2, ge=1, alias="ackQuorum")
    #: rack of bookie ``i`` is ``racks[i % len(racks)]``; when set, rackNodeLabel is not read
    racks: list[str] = Field(default_factory=list)
    #: the label of its node a bookie's rack is read from (``/<value>``); "" reads none
    rack_node_label: str = Field(default=ZONE_LABEL, alias="rackNodeLabel", max_length=317)
    resources: Resources = Field(default_factory=Resources)
    #: extra BookieConfig settings (snake_case names, as in bookie.yaml)
    config: dict[str, Any] = Field(default_factory=dict)
    #: a new value restarts every bookie, one at a time, as a configuration change does
    restarted_at: str | None = Field(default=None, alias="restartedAt", max_length=64)


#: what brokers may be scaled on: their CPU (an HPA the operator makes) or the load figures their
#: load manager reports (the operator scales them itself)
AUTOSCALING_TARGETS = ("CPU", "LoadManager")


def _target_type(value: str) -> str:
    if value not in AUTOSCALING_TARGETS:
        raise ValueError(
            f"{value!r} is not an autoscaling target: expected CPU (an HPA on the brokers' CPU "
            "against their request) or LoadManager (the brokers' own load reports)"
        )
    return value


class AutoscalingTarget(_Spec):
    type: Annotated[str, AfterValidator(_target_type)]
    #: percent: of the brokers' CPU request (CPU), or of what a broker may use by its load
    #: report's highest weighted resource, as the load manager's shedder reads it (LoadManager)
    average_utilization: int = Field(default=80, ge=1, le=100, alias="averageUtilization")


#: Kubernetes' HPA: its default scale-down stabilization window
SCALE_DOWN_STABILIZATION_S = 300


class BrokerAutoscaling(_Spec):
    """Brokers between ``min`` and ``max`` by load; ``replicas`` is then not read."""

    min: int = Field(ge=1, le=100)
    max: int = Field(ge=1, le=100)
    target: AutoscalingTarget
    #: a scale-down follows the highest recommendation of this many seconds (an HPA's
    #: ``behavior.scaleDown.stabilizationWindowSeconds``); a scale-up follows at once
    scale_down_stabilization_seconds: int = Field(
        default=SCALE_DOWN_STABILIZATION_S, ge=0, le=3600, alias="scaleDownStabilizationSeconds"
    )

    @model_validator(mode="after")
    def _bounds(self) -> BrokerAutoscaling:
        if self.max < self.min:
            raise ValueError(f"autoscaling.max={self.max} is below autoscaling.min={self.min}")
        return self

    def bound(self, replicas: int) -> int:
        return max(self.min, min(self.max, replicas))


class BrokersSpec(Placement):
    replicas: int = Field(default=2, ge=0)
    #: scale the brokers by load between min and max instead of keeping ``replicas``
    autoscaling: BrokerAutoscaling | None = None
    read_only_replicas: int = Field(default=0, ge=0, alias="readOnlyReplicas")
    resources: Resources = Field(default_factory=Resources)
    #: extra BrokerConfig settings (snake_case names, as in broker.yaml)
    config: dict[str, Any] = Field(default_factory=dict)
    #: a new value restarts every broker (read-only ones too), one at a time after its bundles
    #: are transferred away, as a configuration change does (``kubectl rollout restart``'s
    #: annotation, for a MagnetarCluster)
    restarted_at: str | None = Field(default=None, alias="restartedAt", max_length=64)


class ReplicationPeer(_Spec):
    name: str
    service_url: str = Field(alias="serviceUrl")
    admin_url: str | None = Field(default=None, alias="adminUrl")


class ExternalCluster(_Spec):
    admin_url: str = Field(alias="adminUrl")
    service_url: str | None = Field(default=None, alias="serviceUrl")


class AuthSpec(_Spec):
    """Token authentication and authorization of the brokers: on by default. The operator makes
    the signing key and the tokens it and the brokers use as Secrets."""

    enabled: bool = True
    #: roles granted everything besides the operator's and the brokers' own
    super_user_roles: list[str] = Field(default_factory=list, alias="superUserRoles")
    #: a Secret whose ``secret.key`` signs the tokens, instead of a key of the cluster's own:
    #: regions that replicate to each other share one (e.g. the first region's
    #: ``<name>-token-key``), so each accepts the other's brokers. ``NAME`` (this namespace) or
    #: ``NAMESPACE/NAME`` (copied into this cluster's ``<name>-token-key``: pods mount only
    #: Secrets of their own namespace)
    signing_key_secret_name: str | None = Field(
        default=None, alias="signingKeySecretName", pattern=_SECRET_REF
    )


class TlsSpec(_Spec):
    """TLS for brokers (pulsar+ssl, https) and bookies (mutual TLS): on by default, with a CA and
    certificates the operator issues and renews, or a Secret a user names (cert-manager's shape:
    ``tls.crt``, ``tls.key``, ``ca.crt``)."""

    enabled: bool = True
    secret_name: str | None = Field(default=None, alias="secretName")
    #: a CA Secret (``tls.crt``, ``tls.key``; ``NAME`` or ``NAMESPACE/NAME``) the operator issues
    #: the cluster's certificates from, instead of a CA of its own: regions that replicate to each
    #: other trust one CA (e.g. the first region's ``<name>-ca``)
    ca_secret_name: str | None = Field(default=None, alias="caSecretName", pattern=_SECRET_REF)
    #: re-issue the operator's certificates this many days before they expire
    renew_before_days: int = Field(default=30, ge=1, le=180, alias="renewBeforeDays")

    @model_validator(mode="after")
    def _one_source(self) -> TlsSpec:
        if self.secret_name and self.ca_secret_name:
            raise ValueError("tls.secretName and tls.caSecretName exclude each other: name one")
        return self


class ClusterSpec(_Spec):
    #: the region's name (Pulsar's clusterName); default: the resource's name
    cluster_name: str | None = Field(default=None, alias="clusterName")
    image: str = "magnetar:0.1.0"
    image_pull_policy: str = Field(default="IfNotPresent", alias="imagePullPolicy")
    metadata_store: MetadataStoreSpec = Field(default_factory=MetadataStoreSpec, alias="metadataStore")
    configuration_store: ConfigurationStoreSpec = Field(
        default_factory=ConfigurationStoreSpec, alias="configurationStore"
    )
    bookies: BookiesSpec = Field(default_factory=BookiesSpec)
    brokers: BrokersSpec = Field(default_factory=BrokersSpec)
    replication_peers: list[ReplicationPeer] = Field(default_factory=list, alias="replicationPeers")
    external: ExternalCluster | None = None
    auth: AuthSpec = Field(default_factory=AuthSpec)
    tls: TlsSpec = Field(default_factory=TlsSpec)

    def region(self, name: str) -> str:
        return self.cluster_name or name


class NamespaceSpec(_Spec):
    #: the MagnetarCluster (same Kubernetes namespace) whose admin REST applies this namespace
    cluster: str = Field(pattern=_OBJECT_NAME)
    tenant: str
    namespace: str
    #: Pulsar clusters (regions) the namespace replicates to; default: the cluster's own region
    clusters: list[str] = Field(default_factory=list)
    bundles: int = Field(default=4, ge=1, le=1024)
    retention_time_in_minutes: int | None = Field(default=None, alias="retentionTimeInMinutes")
    retention_size_in_mb: int | None = Field(default=None, alias="retentionSizeInMB")
    replicated_subscriptions: bool | None = Field(default=None, alias="replicatedSubscriptions")
    #: what deleting the resource does to the namespace in the cluster
    deletion_policy: Literal["Retain", "Delete"] = Field(default="Retain", alias="deletionPolicy")

    @property
    def full_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"


class BundleAction(_Spec):
    type: Literal["Unload", "Transfer", "Split"]
    destination_broker: str | None = Field(default=None, alias="destinationBroker")


class BundleSpec(_Spec):
    cluster: str = Field(pattern=_OBJECT_NAME)
    #: ``tenant/namespace``
    namespace: str
    #: Pulsar's bundle name, ``0x00000000_0x40000000``
    range: str = Field(pattern=_BUNDLE.pattern)
    action: BundleAction | None = None

    @model_validator(mode="after")
    def _range_not_empty(self) -> BundleSpec:
        lo, hi = parse_bundle_range(self.range)
        if lo >= hi:
            raise ValueError(f"bundle range {self.range} is empty: its start must be below its end")
        return self


def check_ledgers(bookies: BookiesSpec) -> None:
    e, qw, qa = bookies.ensemble_size, bookies.write_quorum, bookies.ack_quorum
    if not e >= qw >= qa:
        raise SpecError(
            "InvalidQuorum",
            f"bookies need ensembleSize >= writeQuorum >= ackQuorum, got E={e} Qw={qw} Qa={qa}",
        )
    if 0 < bookies.replicas < e:
        raise SpecError(
            "NotEnoughBookies",
            f"bookies.replicas={bookies.replicas} cannot hold an ensemble of ensembleSize={e}",
        )


def parse_bundle_range(name: str) -> tuple[int, int]:
    match = _BUNDLE.match(name)
    if match is None:
        raise SpecError("InvalidRange", f"bundle range {name!r} is not 0xXXXXXXXX_0xXXXXXXXX")
    return int(match.group(1), 16), int(match.group(2), 16)


def first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "spec"
    return f"{where}: {err['msg']}"
