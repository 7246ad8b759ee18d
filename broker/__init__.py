"""The Pulsar-protocol broker (architecture §2, §3): the binary protocol, topics over managed
ledgers, bundles and their load balancing, the admin REST, geo-replication."""
