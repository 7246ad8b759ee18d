"""Load balancing: which broker serves each bundle and how bundles move between brokers, Pulsar's
``org.apache.pulsar.broker.loadbalance`` (its extensible load manager's assignment, transfer,
shedding and split, with NamespaceService's lookup and unload): the load reports every broker
publishes (``load_report.py``), the leader's shedding, splitting and placement
(``load_manager.py``), the bundles this broker serves, with lookup, unload, split and transfer
(``bundles.py``), the broker-to-broker calls of a transfer (``peers.py``), the broker's registry
record, campaign and load manager while it is a member of the cluster (``membership.py``), and
the pool it serves in, writable or read-only (``pools.py``). Bundle ownership
records and lookup addresses (``broker/ownership.py``) stay beside the namespaces, for the
connection, the admin REST and the read-only pool use them too."""
