"""Whether a topic takes another producer or consumer: Pulsar's maxProducers / maxConsumers and,
for producers, the backlog quota's ``producer_request_hold`` (the client keeps its messages and
retries) and ``producer_exception`` (the client fails its sends)."""

from __future__ import annotations

from magnetar.broker.policies.backlog_quota import exceeded
from magnetar.broker.topic import Topic
from magnetar.proto import PulsarApi_pb2 as api

E = api.ServerError


def producer_refusal(topic: Topic) -> tuple[int, str] | None:
    """(ServerError, message) when the topic takes no more producers now."""
    limit = topic.settings.policies.maxProducers or 0
    if limit and len(topic.client_producers()) >= limit:
        return E.ProducerBusy, f"{topic.name} reached its limit of {limit} producers"
    quota = exceeded(topic)
    if quota is not None and quota.policy == "producer_request_hold":
        return (
            E.ProducerBlockedQuotaExceededError,
            f"{topic.name} is over its backlog quota of {quota.limitSize} bytes",
        )
    if quota is not None and quota.policy == "producer_exception":
        return (
            E.ProducerBlockedQuotaExceededException,
            f"{topic.name} is over its backlog quota of {quota.limitSize} bytes",
        )
    return None


def consumer_refusal(topic: Topic) -> str | None:
    limit = topic.settings.policies.maxConsumers or 0
    if limit and len(topic.consumers()) >= limit:
        return f"{topic.name} reached its limit of {limit} consumers"
    return None
