"""How full the disk the tests write to is, as a bookie counts it, said in pytest's header.

A bookie turns read-only at 95% full (BookKeeper's ``diskUsageThreshold``; ours has the same
default), so a run on a nearly full disk fails in ways that look like bugs: ledgers with no
writable bookies, sends never acknowledged, unloads answered with errors. A bookie counts as
BookKeeper does, the space available to it against the file system's size, so blocks reserved for
root count as used: `df` can say half full where a bookie sees 80%. The header says what a bookie
would see, and warns from 90% (the bookies' low-water mark, ``diskUsageLwmThreshold``).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from magnetar.bookie.config import BookieConfig
from magnetar.bookie.disk_monitor import disk_usage

#: the fraction at which bookies turn read-only, and the one from which the header warns
READ_ONLY_AT = BookieConfig.model_fields["disk_usage_threshold"].default
WARN_AT = BookieConfig.model_fields["disk_usage_lwm_threshold"].default


def disk_note(path: Path, used: float, available: int) -> list[str]:
    """The header's lines for the file system at ``path``: ``used`` as a bookie counts it, and
    ``available`` bytes."""
    lines = [f"disk: {path} {used:.0%} full as a bookie counts it, {available / 2**30:.1f} GiB available"]
    if used >= WARN_AT:
        lines.append(
            f"WARNING: bookies turn read-only at {READ_ONLY_AT:.0%}, and tests that write through "
            "them then fail: free some space first (uv cache prune, old runs under /tmp)"
        )
    return lines


def pytest_report_header(config: pytest.Config) -> list[str]:
    path = Path(tempfile.gettempdir())
    return disk_note(path, disk_usage(path), shutil.disk_usage(path).free)
