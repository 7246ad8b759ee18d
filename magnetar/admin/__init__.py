"""The admin REST's client side, Pulsar's ``pulsar-client-admin``: the one client of the
``/admin/v2`` paths (``client.py``) that the brokers, the operator, the chaos lab and the
benchmarks share. It is a client of the REST API and imports nothing of ``magnetar.broker``, so
the same calls work against Apache Pulsar."""
