"""A namespace's creation body, Pulsar's Policies: the settings Magnetar has are taken, in
Pulsar's names; the defaults Pulsar's own clients send change nothing."""

from __future__ import annotations

import pytest

from magnetar.broker.admin.namespace_body import apply_body
from magnetar.broker.namespace import NamespaceError, NamespacePolicies


def test_the_settings_of_the_body_are_taken() -> None:
    policies = NamespacePolicies()
    apply_body(
        policies,
        {
            "auth_policies": {
                "namespace_auth": {"app": ["consume", "produce"]},
                "destination_auth": {"persistent://t/n/x": {"reader": ["consume"]}},
                "subscription_auth_roles": {"audit": ["reader", "app", "app"]},
            },
            "deduplicationEnabled": True,
            "autoTopicCreationOverride": {"allowAutoTopicCreation": False},
            "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1},
            "message_ttl_in_seconds": 30,
            "backlog_quota_map": {"destination_storage": {"limitSize": 1024, "policy": "producer_exception"}},
            "max_producers_per_topic": 3,
            "publishMaxMessageRate": {"here": {"publishThrottlingRateInMsg": 10}, "there": None},
            "topicDispatchRate": {"there": {"dispatchThrottlingRateInMsg": 5}},
            "schema_validation_enforced": True,
            "compaction_threshold": 1000,
        },
        "here",
    )
    assert policies.auth_policies.namespace_auth == {"app": ["consume", "produce"]}
    assert policies.auth_policies.destination_auth == {"persistent://t/n/x": {"reader": ["consume"]}}
    assert policies.auth_policies.subscription_auth_roles == {"audit": ["app", "reader"]}
    assert policies.deduplication_enabled is True
    assert policies.auto_topic_creation is not None
    assert policies.auto_topic_creation.allowAutoTopicCreation is False
    own = policies.topic_policies
    assert own.retention is not None
    assert own.retention.retentionTimeInMinutes == 60
    assert own.messageTTL == 30
    assert own.backlogQuota is not None
    assert own.backlogQuota.limitSize == 1024
    assert own.maxProducers == 3
    assert own.publishRate is not None
    assert own.publishRate.publishThrottlingRateInMsg == 10
    assert own.dispatchRate is None  # another cluster's rate
    assert own.schemaValidationEnforced is True
    assert own.compactionThreshold == 1000


def test_the_defaults_a_java_client_sends_change_nothing() -> None:
    policies = NamespacePolicies()
    apply_body(
        policies,
        {
            "auth_policies": {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}},
            "backlog_quota_map": {},
            "publishMaxMessageRate": {},
            "deduplicationEnabled": None,
            "schema_compatibility_strategy": "UNDEFINED",
            "schema_validation_enforced": False,
            "deleted": False,
            "encryption_required": False,
        },
        "here",
    )
    assert policies == NamespacePolicies()


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"auth_policies": {"namespace_auth": {"app": ["everything"]}}}, 400),
        ({"auth_policies": {"namespace_auth": {"app": "produce"}}}, 400),
        ({"auth_policies": {"subscription_auth_roles": {"s": "app"}}}, 400),
        ({"message_ttl_in_seconds": -5}, 412),
        ({"backlog_quota_map": {"message_age": {"limitTime": 5}}}, 412),
        ({"retention_policies": "forever"}, 400),
        ({"deduplicationEnabled": "yes"}, 400),
    ],
)
def test_a_wrong_body_is_refused_saying_why(body: dict[str, object], status: int) -> None:
    with pytest.raises(NamespaceError) as refused:
        apply_body(NamespacePolicies(), body, "here")
    assert refused.value.status == status
