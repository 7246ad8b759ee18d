"""A topic's policies at work: its own (topic-level) settings, the ones that apply (resolved by
broker/policies/applied.py), retention set on its managed ledger, and its publish and dispatch rate
limiters. TTL, backlog quotas and producer/consumer limits are read from ``policies`` where they
are enforced."""

from __future__ import annotations

from typing import Protocol

from magnetar.broker.managed_ledger import ManagedLedgerConfig
from magnetar.broker.policies.data import DispatchRate, Policies, PublishRate
from magnetar.broker.rate_limiter import RateLimiter


class TopicSettings:
    """A topic's own (topic-level) policies, the ones that apply, and their limiters."""

    def __init__(self) -> None:
        self.own = Policies()
        self.policies = Policies()
        self.publish = RateLimiter()
        self.dispatch = RateLimiter()
        self._base: ManagedLedgerConfig | None = None

    @property
    def delayed_delivery(self) -> bool:
        """Whether messages with a delivery time are held back until it comes."""
        policy = self.policies.delayedDelivery
        return policy is None or policy.active

    def apply(self, policies: Policies, ledger: _Configurable) -> None:
        self.policies = policies
        base = self._base = self._base or ledger.config
        retention = policies.retention
        ledger.config = (
            base
            if retention is None
            else base.model_copy(
                update={
                    "retention_time_minutes": retention.retentionTimeInMinutes,
                    "retention_size_mb": retention.retentionSizeInMB,
                }
            )
        )
        publish = policies.publishRate or PublishRate()
        self.publish.configure(publish.publishThrottlingRateInMsg, publish.publishThrottlingRateInByte)
        dispatch = policies.dispatchRate or DispatchRate()
        self.dispatch.configure(
            dispatch.dispatchThrottlingRateInMsg,
            dispatch.dispatchThrottlingRateInByte,
            dispatch.ratePeriodInSecond,
        )


class _Configurable(Protocol):
    config: ManagedLedgerConfig
