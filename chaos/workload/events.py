"""The event log (architecture §6): one JSON object per line in ``<run>/events/<client>.jsonl``,
with the names and version of the run directory's contract (``magnetar.common.run_directory``).

Writers are called from the Pulsar client's I/O threads as well as ours, so each log has a lock;
lines are flushed at once (a killed workload loses at most the line being written).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from magnetar.common.run_directory import EVENTS, SCHEMA_VERSION, Layout, payload_digest


def now_ns() -> int:
    return time.time_ns()


def message_id_text(message_id: Any) -> str:
    """``ledger:entry:partition:batch`` as the cluster reported it."""
    m = message_id
    return f"{m.ledger_id()}:{m.entry_id()}:{m.partition()}:{m.batch_index()}"


def message_payload(uid: str, size: int) -> bytes:
    """A message's payload: its uid, padded to ``size`` bytes (longer if the uid needs it). Each
    payload is its own, so a digest tells them apart: a message served with another's payload is
    seen, not just one served under another's uid."""
    return f"{uid} ".encode().ljust(size, b"x")


def digest(payload: bytes) -> str:
    """The ``digest`` field of a payload (the contract's)."""
    return payload_digest(payload)


class EventLog:
    def __init__(
        self,
        events_dir: Path,
        run: str,
        client: str,
        role: str,
        topic: str,
        *,
        sub_type: str | None = None,
    ) -> None:
        """``sub_type``: a consumer's subscription type, on every line it writes (what order the
        post-mortem may expect of its subscription)."""
        events_dir.mkdir(parents=True, exist_ok=True)
        self.path = events_dir / f"{client}{Layout.EVENT_LOG_SUFFIX}"
        self._file = self.path.open("a", buffering=1)
        self._lock = threading.Lock()
        self._base: dict[str, Any] = {"v": SCHEMA_VERSION, "run": run, "client": client, "role": role}
        self._base["topic"] = topic
        if sub_type is not None:
            self._base["sub_type"] = sub_type
        self.counts: dict[str, int] = dict.fromkeys(EVENTS, 0)

    def write(self, event: str, cluster: str, **fields: Any) -> None:
        record = {"ts": now_ns(), **self._base, "cluster": cluster, "event": event}
        record.update({k: v for k, v in fields.items() if v is not None})
        line = json.dumps(record, separators=(",", ":"))
        with self._lock:
            self._file.write(line + "\n")
            self.counts[event] += 1

    def close(self) -> None:
        with self._lock:
            self._file.close()
