"""Settings of managed ledgers: Pulsar's ``managedLedger*`` names in snake_case, Pulsar's defaults."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class ManagedLedgerConfig(BaseModel):
    #: managedLedgerDefaultEnsembleSize / WriteQuorum / AckQuorum
    ensemble_size: int = Field(default=2, ge=1)
    write_quorum: int = Field(default=2, ge=1)
    ack_quorum: int = Field(default=2, ge=1)
    #: managedLedgerMaxEntriesPerLedger: a ledger is rolled once it has this many entries ...
    max_entries_per_ledger: int = Field(default=50_000, ge=1)
    #: ... or this many megabytes (managedLedgerMaxSizePerLedgerMbytes) ...
    max_size_per_ledger_mb: int = Field(default=2048, ge=1)
    #: ... but not before it is this old (managedLedgerMinLedgerRolloverTimeMinutes) ...
    min_ledger_rollover_time_minutes: float = Field(default=10, ge=0)
    #: ... and always once it is this old and has entries (managedLedgerMaxLedgerRolloverTimeMinutes)
    max_ledger_rollover_time_minutes: float = Field(default=240, ge=0)
    #: defaultRetentionTimeInMinutes / defaultRetentionSizeInMB: how long / how much of the data
    #: every durable cursor has consumed is kept. 0 deletes it at once, -1 means no limit of that
    #: kind (both -1: keep consumed data forever).
    retention_time_minutes: float = Field(default=0, ge=-1)
    retention_size_mb: float = Field(default=0, ge=-1)
    #: retentionCheckIntervalInSeconds: how often consumed ledgers are trimmed and old ledgers
    #: rolled even when nothing is written (they are also trimmed at every ledger roll)
    retention_check_interval_seconds: float = Field(default=120, gt=0)
    #: managedLedgerCacheSizeMB: recent entries kept in memory for tailing readers
    cache_size_mb: int = Field(default=64, ge=0)
    #: how long a cursor change (acknowledgement) may wait before it is persisted (an entry of the
    #: cursor ledger); acks within this window are written together (Pulsar:
    #: managedLedgerDefaultMarkDeleteRateLimit)
    cursor_flush_interval_ms: int = Field(default=100, ge=0)
    #: managedLedgerCursorMaxEntriesPerLedger / managedLedgerCursorRolloverTimeInSeconds: a cursor
    #: ledger is replaced by a new one once it has this many entries or is this old (0: no age
    #: limit). Cursor ledgers use the ensemble and quorums above, as Pulsar's default to them.
    cursor_max_entries_per_ledger: int = Field(default=50_000, ge=1)
    cursor_rollover_time_seconds: float = Field(default=14_400, ge=0)
    #: managedLedgerMaxUnackedRangesToPersist: beyond this many individually-acknowledged ranges
    #: only the first ones are persisted (later acked entries may be redelivered after a restart,
    #: never lost)
    max_unacked_ranges_to_persist: int = Field(default=10_000, ge=0)

    @model_validator(mode="after")
    def _quorums(self) -> ManagedLedgerConfig:
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum:
            raise ValueError(
                f"need ensemble_size >= write_quorum >= ack_quorum, got "
                f"{self.ensemble_size} >= {self.write_quorum} >= {self.ack_quorum}"
            )
        return self
