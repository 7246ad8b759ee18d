"""The admin REST's client side: the one client of the ``/admin/v2`` paths (``client.py``, Pulsar's
``pulsar-client-admin``) that the brokers, the operator, the chaos lab and the benchmarks share,
and the ``magnetar admin`` command over it (``cli.py`` and its ``cli_*.py`` groups, Pulsar's
``pulsar-admin``). It is a client of the REST API and imports nothing of ``magnetar.broker``, so
the same calls work against Apache Pulsar; the names both sides use, such as the schema
compatibility strategies (``schema_strategies.py``), live here and the broker imports them."""
