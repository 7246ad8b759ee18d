"""Storage nodes and the ledger client, after Apache BookKeeper (architecture §2, §5).

Server side: ``journal`` (group-commit fsync), ``entry_log`` + ``index`` (``ledger_storage``),
``server`` (gRPC). Client side: ``client/`` (ensembles, quorums, ensemble change, recovery).
"""
