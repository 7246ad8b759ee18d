"""The body of a namespace's creation (``PUT /admin/v2/namespaces/{tenant}/{namespace}``): Pulsar's
Policies object, whose settings the new namespace starts with, as Pulsar's createNamespace stores
the body it is given. What Magnetar has an equivalent for is taken; the other fields are accepted
and ignored, as Pulsar's own clients send every field with its default.

Pulsar's names and what they become here:

    auth_policies                 namespace_auth and destination_auth grants, subscription_auth_roles
    deduplicationEnabled          deduplication_enabled
    autoTopicCreationOverride     auto_topic_creation
    retention_policies, message_ttl_in_seconds, backlog_quota_map (destination_storage),
    max_producers_per_topic, max_consumers_per_topic, publishMaxMessageRate and topicDispatchRate
    (this cluster's entry), schema_compatibility_strategy, is_allow_auto_update_schema,
    schema_validation_enforced, compaction_threshold
                                  the namespace's topic policies

``bundles`` and ``replication_clusters`` are read by the caller, which checks them against the
store.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from magnetar.broker.authorization import check_actions
from magnetar.broker.namespace import AuthPolicies, NamespaceError, NamespacePolicies
from magnetar.broker.policies.data import AutoTopicCreationOverride, Policies

_RANGE_ERRORS = {"greater_than_equal", "less_than_equal", "greater_than", "less_than", "literal_error"}
_QUOTA_TYPE = "destination_storage"

#: Pulsar's Policies field -> the namespace topic policy it sets
_TOPIC_POLICIES = {
    "retention_policies": "retention",
    "message_ttl_in_seconds": "messageTTL",
    "max_producers_per_topic": "maxProducers",
    "max_consumers_per_topic": "maxConsumers",
    "schema_compatibility_strategy": "schemaCompatibilityStrategy",
    "is_allow_auto_update_schema": "isAllowAutoUpdateSchema",
    "compaction_threshold": "compactionThreshold",
}
#: Pulsar's per-cluster rate maps -> the topic policy this cluster's entry sets
_PER_CLUSTER = {"publishMaxMessageRate": "publishRate", "topicDispatchRate": "dispatchRate"}


def apply_body(policies: NamespacePolicies, body: dict[str, Any], cluster: str) -> None:
    """Set ``policies`` from the Pulsar Policies ``body``; NamespaceError 400 for a wrong shape,
    412 for a value out of range, as the namespace's own set calls answer."""
    if body.get("auth_policies") is not None:
        policies.auth_policies = _auth_policies(body["auth_policies"])
    if body.get("deduplicationEnabled") is not None:
        if not isinstance(body["deduplicationEnabled"], bool):
            raise NamespaceError(
                f"deduplicationEnabled must be true or false, not {body['deduplicationEnabled']!r}", 400
            )
        policies.deduplication_enabled = body["deduplicationEnabled"]
    if body.get("autoTopicCreationOverride") is not None:
        try:
            policies.auto_topic_creation = AutoTopicCreationOverride.model_validate(
                body["autoTopicCreationOverride"]
            )
        except ValidationError as exc:
            raise NamespaceError(
                f"invalid autoTopicCreationOverride: {exc.errors()[0]['msg']}", 412
            ) from None
    policies.topic_policies = _topic_policies(body, cluster)


def _auth_policies(value: object) -> AuthPolicies:
    if not isinstance(value, dict):
        raise NamespaceError(f"auth_policies must be an object, not {value!r}", 400)
    namespace_auth = _grants("auth_policies.namespace_auth", value.get("namespace_auth") or {})
    destinations = value.get("destination_auth") or {}
    if not isinstance(destinations, dict):
        raise NamespaceError(f"auth_policies.destination_auth must be an object, not {destinations!r}", 400)
    destination_auth = {
        str(topic): _grants(f"auth_policies.destination_auth[{topic}]", grants)
        for topic, grants in destinations.items()
    }
    subscriptions = value.get("subscription_auth_roles") or {}
    if not isinstance(subscriptions, dict) or not all(
        isinstance(roles, list) and all(isinstance(role, str) for role in roles)
        for roles in subscriptions.values()
    ):
        raise NamespaceError(
            f"auth_policies.subscription_auth_roles must map subscriptions to roles, not {subscriptions!r}",
            400,
        )
    return AuthPolicies(
        namespace_auth=namespace_auth,
        destination_auth=destination_auth,
        subscription_auth_roles={str(name): sorted(set(roles)) for name, roles in subscriptions.items()},
    )


def _grants(where: str, value: object) -> dict[str, list[str]]:
    """A {role: [action]} map, each action one of Pulsar's AuthAction."""
    if not isinstance(value, dict):
        raise NamespaceError(f"{where} must be an object of role: [actions], not {value!r}", 400)
    grants = {}
    for role, actions in value.items():
        if not isinstance(actions, list):
            raise NamespaceError(f"{where}[{role}] must be a list of actions, not {actions!r}", 400)
        try:
            grants[str(role)] = check_actions(actions)
        except ValueError as exc:
            raise NamespaceError(f"{where}[{role}]: {exc}", 400) from None
    return grants


def _topic_policies(body: dict[str, Any], cluster: str) -> Policies:
    doc: dict[str, object] = {
        ours: body[theirs] for theirs, ours in _TOPIC_POLICIES.items() if body.get(theirs) is not None
    }
    # Pulsar's boolean defaults to false and means "not enforced here": the broker's setting applies
    if body.get("schema_validation_enforced") is True:
        doc["schemaValidationEnforced"] = True
    quotas = body.get("backlog_quota_map") or {}
    if not isinstance(quotas, dict):
        raise NamespaceError(f"backlog_quota_map must be an object, not {quotas!r}", 400)
    unsupported = set(quotas) - {_QUOTA_TYPE}
    if unsupported:
        raise NamespaceError(
            f"backlog quotas of type {sorted(unsupported)} are not supported (only {_QUOTA_TYPE})", 412
        )
    if quotas.get(_QUOTA_TYPE) is not None:
        doc["backlogQuota"] = quotas[_QUOTA_TYPE]
    for theirs, ours in _PER_CLUSTER.items():
        rates = body.get(theirs) or {}
        if not isinstance(rates, dict):
            raise NamespaceError(f"{theirs} must be an object of cluster: rate, not {rates!r}", 400)
        if rates.get(cluster) is not None:
            doc[ours] = rates[cluster]
    try:
        return Policies.model_validate(doc)
    except ValidationError as exc:
        status = 412 if all(e["type"] in _RANGE_ERRORS for e in exc.errors()) else 400
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise NamespaceError(f"invalid policies: {detail}", status) from None
