"""Where each entry is: (ledger, entry) → (entry log, offset, size).

Kept in memory and rebuilt at start by scanning the entry logs (they are self-describing) and
replaying the journal past the last checkpoint, so there is no second on-disk structure to keep
consistent with the logs. It also tracks which ledgers each log holds, so that garbage collection
can drop a log file once every ledger in it is deleted.
"""

from __future__ import annotations

from collections import defaultdict

Location = tuple[int, int, int]  # log id, offset, size


class Index:
    def __init__(self) -> None:
        self._ledgers: dict[int, dict[int, Location]] = {}
        self._log_ledgers: defaultdict[int, set[int]] = defaultdict(set)

    def put(self, ledger_id: int, entry_id: int, location: Location) -> None:
        entries = self._ledgers.get(ledger_id)
        if entries is None:
            entries = self._ledgers[ledger_id] = {}
        entries[entry_id] = location
        self._log_ledgers[location[0]].add(ledger_id)

    def get(self, ledger_id: int, entry_id: int) -> Location | None:
        entries = self._ledgers.get(ledger_id)
        return None if entries is None else entries.get(entry_id)

    def has_ledger(self, ledger_id: int) -> bool:
        return ledger_id in self._ledgers

    def ledgers(self) -> list[int]:
        return list(self._ledgers)

    def entry_count(self, ledger_id: int) -> int:
        return len(self._ledgers.get(ledger_id, ()))

    def delete_ledger(self, ledger_id: int) -> None:
        self._ledgers.pop(ledger_id, None)
        for ledgers in self._log_ledgers.values():
            ledgers.discard(ledger_id)

    def empty_logs(self) -> list[int]:
        """Logs that held entries once and now hold none of a live ledger."""
        return [log_id for log_id, ledgers in self._log_ledgers.items() if not ledgers]

    def forget_log(self, log_id: int) -> None:
        self._log_ledgers.pop(log_id, None)
