"""Non-persistent topics (Pulsar's PIP-2): messages go from producers to the consumers connected
at that moment, through memory only, at most once.

* ``memory_ledger``: the topic's log as a managed ledger kept in memory, holding each entry only
  until every subscription has dispatched (or dropped) it;
* ``topic``: the topic over it, whose subscriptions always start at the latest message and drop
  what their consumers have no permits for, counting it.
"""
