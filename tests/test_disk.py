"""The header's word on the disk: quiet below the bookies' low-water mark, a warning from it."""

from __future__ import annotations

from pathlib import Path

from tests.disk import disk_note

GIB = 2**30


def test_a_disk_well_below_the_mark_is_only_reported() -> None:
    assert disk_note(Path("/tmp"), 0.5, 50 * GIB) == [
        "disk: /tmp 50% full as a bookie counts it, 50.0 GiB available"
    ]


def test_a_disk_near_the_bookies_read_only_mark_gets_a_warning_naming_it() -> None:
    lines = disk_note(Path("/tmp"), 0.92, 8 * GIB)
    assert lines[0] == "disk: /tmp 92% full as a bookie counts it, 8.0 GiB available"
    assert len(lines) == 2
    assert "read-only at 95%" in lines[1]
