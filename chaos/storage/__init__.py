"""Probes and waits on the storage layer of a region (bookies, ledgers, auto-recovery)."""
