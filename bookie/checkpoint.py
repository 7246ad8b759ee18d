"""The checkpoint mark: how far the journal is reflected in durable entry logs.

Written (atomically: temp file, fsync, rename, fsync of the directory) into every ledger
directory after the entry logs are flushed, with the per-ledger state the entry logs cannot
rebuild on their own (fenced flag, LAC, master key).
At start the newest copy wins; journal replay begins at its mark.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from magnetar.bookie.journal import Mark

log = logging.getLogger(__name__)

FILE_NAME = "checkpoint.json"

#: what the checkpoint keeps of one ledger: fenced, LAC, master key
LedgerSnapshot = tuple[bool, int, bytes | None]


@dataclass
class Checkpoint:
    mark: Mark = field(default_factory=lambda: Mark(0, 0))
    #: ledger id -> (fenced, LAC, master key or None when no keyed call has been seen)
    ledgers: dict[int, LedgerSnapshot] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "journal_file": self.mark.file_id,
                "journal_offset": self.mark.offset,
                "ledgers": [
                    [lid, fenced, lac, None if key is None else key.hex()]
                    for lid, (fenced, lac, key) in sorted(self.ledgers.items())
                ],
            }
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> Checkpoint:
        raw = json.loads(data)
        ledgers: dict[int, LedgerSnapshot] = {}
        for row in raw["ledgers"]:
            # Rows written before master keys were recorded have three fields.
            key = row[3] if len(row) > 3 else None
            ledgers[int(row[0])] = (bool(row[1]), int(row[2]), None if key is None else bytes.fromhex(key))
        return cls(Mark(int(raw["journal_file"]), int(raw["journal_offset"])), ledgers)


def load(directories: list[Path]) -> Checkpoint:
    """The newest readable checkpoint among ``directories``; an empty one on a fresh bookie."""
    best = Checkpoint()
    for directory in directories:
        path = directory / FILE_NAME
        try:
            found = Checkpoint.decode(path.read_bytes())
        except FileNotFoundError:
            continue
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
            continue
        if found.mark >= best.mark:
            best = found
    return best


def save(directories: list[Path], checkpoint: Checkpoint) -> None:
    """Blocking: call in a thread."""
    data = checkpoint.encode()
    for directory in directories:
        tmp = directory / (FILE_NAME + ".tmp")
        with tmp.open("wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, directory / FILE_NAME)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
