"""Read-only topic ownership (PIP-63): brokers that serve consumers of topics owned writable
elsewhere, reading the same ledgers from the bookies.

- ``ledger``: a managed ledger opened without recovery that tails the writable owner's ledgers
  (LAC long-poll, ledger rolls noticed by metadata polling or a watch);
- ``cursor``: a cursor cache whose changes are forwarded to the writable owner;
- ``cursor_client`` / ``cursor_service``: the cursor RPCs (``proto/broker.proto``) on either side.
"""
