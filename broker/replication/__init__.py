"""Geo-replication (architecture §5): every cluster of a replicated namespace sends the messages
published in it to every other cluster of the namespace, over the Pulsar protocol.

- ``manager``: which topics replicate where (namespace policies in the configuration store),
  starting and stopping replicators as topics load, close and policies change;
- ``replicator``: one topic's replicator to one remote cluster (cursor ``pulsar.repl.<remote>``,
  producer ``pulsar.repl.<local>`` on the remote);
- ``producer``: the asyncio Pulsar-protocol producer replicators write with.

No loss, no duplicates: the replicator's cursor moves only on the remote's receipts, so after
any failure (either side restarted, unloaded, transferred, unreachable) it sends again from its
cursor. The remote stores each replicated message once: the replicator adds the message's
position in its origin topic as the property ``__MSG_PROP_REPL_SOURCE_POSITION``
(``ledgerId:entryId``, Pulsar's name), and a replicator producer's sends are deduplicated by
(origin cluster, that position), which only grows, whatever the namespace's deduplication
setting. That state is rebuilt after a restart from the stored entries themselves
(``pulsar.dedup.replicated`` cursor snapshot plus replay), so it is never behind what was
stored. Unlike deduplication by producer name and sequence id (Pulsar's older way), a producer
that restarts its sequence ids under a fixed name loses nothing. The payload is untouched; the
metadata gains ``replicated_from`` and that property.
"""
