"""The cluster file of ``magnetar local up -f cluster.yaml`` (see ``examples/*.yaml``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


class ClusterSpecError(ValueError):
    pass


class LedgerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ensemble_size: int = Field(default=2, ge=1)
    write_quorum: int = Field(default=2, ge=1)
    ack_quorum: int = Field(default=2, ge=1)

    @model_validator(mode="after")
    def _quorums(self) -> LedgerSpec:
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum:
            raise ValueError(
                f"need ensemble_size >= write_quorum >= ack_quorum, got "
                f"{self.ensemble_size}/{self.write_quorum}/{self.ack_quorum}"
            )
        return self


class RegionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    bookies: int = Field(default=3, ge=1)
    brokers: int = Field(default=1, ge=0)
    #: read-only brokers (PIP-63 pool, ``magnetar broker --read-only``), started after the others
    read_only_brokers: int = Field(default=0, ge=0)
    ledger: LedgerSpec = Field(default_factory=LedgerSpec)
    #: extra settings for every bookie / broker of the region (their config names)
    bookie_settings: dict[str, Any] = Field(default_factory=dict)
    broker_settings: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _fits(self) -> RegionSpec:
        if not _NAME.match(self.name):
            raise ValueError(f"region name {self.name!r} must be lowercase letters, digits and dashes")
        if self.ledger.ensemble_size > self.bookies:
            raise ValueError(
                f"region {self.name}: ensemble_size {self.ledger.ensemble_size} needs at least that many "
                f"bookies, the region has {self.bookies}"
            )
        return self


class SecuritySpec(BaseModel):
    """``security:`` of a cluster file (see magnetar.local.secured_cluster); off by default."""

    model_config = ConfigDict(extra="forbid")
    #: token authentication and authorization on every broker, a super-user token for the lab
    tokens: bool = False
    #: TLS ports on every broker, and replication between regions over pulsar+ssl://
    tls: bool = False

    @property
    def enabled(self) -> bool:
        return self.tokens or self.tls


class ClusterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    regions: list[RegionSpec] = Field(min_length=1)
    #: with two or more regions, carry cross-region traffic through link proxies that
    #: ``partition_regions`` can cut (see magnetar.local.links)
    link_proxies: bool = True
    security: SecuritySpec = Field(default_factory=SecuritySpec)
    #: ZooKeeper's JVM heap (-Xmx): it holds every node in memory, four a topic
    zookeeper_heap: str = Field(default="256m", pattern=r"^[0-9]+[kmgKMG]$")

    @property
    def linked(self) -> bool:
        return self.link_proxies and len(self.regions) > 1

    @model_validator(mode="after")
    def _unique(self) -> ClusterSpec:
        names = [r.name for r in self.regions]
        if len(set(names)) != len(names):
            raise ValueError(f"region names must be unique: {names}")
        return self

    @classmethod
    def load(cls, path: Path) -> ClusterSpec:
        try:
            doc = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise ClusterSpecError(f"cannot read cluster file {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ClusterSpecError(f"{path} is not valid YAML: {exc}") from exc
        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or 'file'}: {error['msg']}"
                for error in exc.errors()
            )
            raise ClusterSpecError(f"{path}: {problems}") from exc
