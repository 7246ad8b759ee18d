"""Auto-recovery (BookKeeper's AutoRecovery): keep every entry at Qw copies when bookies go.

- ``auditor.py``: one auditor in the cluster (elected through the metadata store) watches the
  bookie registrations; a bookie missing for longer than ``lost_bookie_recovery_delay`` is lost,
  and every ledger with a fragment on it is marked under-replicated. A periodic check of all
  ledgers (and, optionally, of their entries on each replica) catches what the watch missed.
- ``replication_worker.py``: on every bookie, a worker claims marked ledgers one at a time
  under an ephemeral lock, copies each affected fragment from surviving replicas to a
  replacement bookie (digests verified, bandwidth throttled), and swaps the ensemble in the
  ledger metadata by compare-and-set. The mark goes once no fragment needs the lost bookie.
- ``marks.py``: the under-replication marks and locks in the metadata store.
- ``service.py``: both, as run inside a bookie process.
"""
