"""The admin REST server (architecture §3), a subset of Pulsar's ``/admin/v2`` as its
``org.apache.pulsar.broker.admin.v2`` resources serve it: the aiohttp application and its
clusters, tenants, namespaces and bundles (``app.py``), the resources for topics, subscriptions,
messages, schemas, permissions and policies (``topics.py``, ``subscriptions.py``, ``messages.py``,
``schemas.py``, ``permissions.py``, ``policies.py``), who may call what (``access.py``) and what
they share: owner redirects, JSON errors, topic lookups (``http.py``). Its client and the
``magnetar admin`` command are not here: they are ``magnetar.admin``."""
