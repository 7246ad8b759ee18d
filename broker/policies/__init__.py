"""Namespace and topic policies, stored, applied and checked: their shapes, in Pulsar's names, and
the store of topic-level ones (``data.py``, Pulsar's ``org.apache.pulsar.common.policies.data``
and its TopicPoliciesService), which of them apply to each loaded topic (``applied.py``) and how
a topic puts them to work (``topic_settings.py``), and their enforcement, as Pulsar's
BrokerService runs it: backlog quotas (``backlog_quota.py``, its BacklogQuotaManager), message
TTLs (``message_expiry.py``, its PersistentMessageExpiryMonitor) and the periodic checks that
apply both and start compactions (``checks.py``)."""
