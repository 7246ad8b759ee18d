"""Topic compaction (Pulsar's): the latest message per key, kept in a ledger of its own, which
``read_compacted`` subscriptions and readers read up to the compaction horizon before the tail."""
