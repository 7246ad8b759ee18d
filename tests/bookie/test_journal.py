"""The journal: group commit, replay, torn tails."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from magnetar.bookie import journal
from magnetar.bookie.journal import Journal, JournalCorruptError, Mark, journal_files


async def _write(directory: Path, bodies: list[bytes], **options: object) -> Journal:
    j = Journal(directory, **options)  # type: ignore[arg-type]
    j.start(0)
    await asyncio.gather(*(j.append(journal.FENCE, body) for body in bodies))
    await j.close()
    return j


def _replay(directory: Path) -> list[bytes]:
    return [body for _, body in journal.read_records(directory, Mark(0, 0))]


def _bodies(n: int) -> list[bytes]:
    return [i.to_bytes(8, "big") for i in range(n)]


async def test_group_commit_makes_many_adds_durable_with_few_fsyncs(tmp_path: Path) -> None:
    j = Journal(tmp_path, max_group_wait_ms=1)
    j.start(0)

    async def writer(task: int) -> None:
        # Each writer waits for its record to be durable before the next, as a client would.
        for i in range(50):
            await j.append(journal.LAC, journal.encode_lac(task, i))

    await asyncio.gather(*(writer(t) for t in range(20)))
    await j.close()
    assert j.record_count == 1000
    # 1000 records from 20 concurrent writers: they share fsyncs (one per round at most).
    assert 1 <= j.fsync_count <= 100
    replayed = [journal.decode_lac(body) for _, body in journal.read_records(tmp_path, Mark(0, 0))]
    assert sorted(replayed) == [(t, i) for t in range(20) for i in range(50)]


async def test_without_sync_data_nothing_is_fsynced_but_everything_is_written(tmp_path: Path) -> None:
    j = await _write(tmp_path, _bodies(100), sync_data=False)
    assert j.fsync_count == 0
    assert _replay(tmp_path) == _bodies(100)


async def test_replay_from_a_mark_skips_records_before_it(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.start(0)
    await j.append(journal.FENCE, journal.encode_fence(1))
    mark = j.position
    await j.append(journal.FENCE, journal.encode_fence(2))
    await j.close()
    assert [journal.decode_fence(b) for _, b in journal.read_records(tmp_path, mark)] == [2]


async def test_rollover_starts_new_files_and_replay_reads_them_in_order(tmp_path: Path) -> None:
    j = await _write(tmp_path, _bodies(100), max_file_bytes=200)
    assert len(journal_files(tmp_path)) > 5
    assert _replay(tmp_path) == _bodies(100)
    await j.remove_before(3)
    assert min(journal_files(tmp_path)) == 3


async def test_torn_tail_cut_mid_record_is_dropped_and_truncated(tmp_path: Path) -> None:
    await _write(tmp_path, _bodies(10))
    path = journal_files(tmp_path)[0]
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(size - 3)  # the last record loses its last bytes
    assert _replay(tmp_path) == _bodies(9)
    assert path.stat().st_size == size - 17  # 17 bytes: frame 8 + type 1 + body 8
    assert _replay(tmp_path) == _bodies(9)  # and stays that way


async def test_torn_tail_with_partial_header_is_dropped(tmp_path: Path) -> None:
    await _write(tmp_path, _bodies(4))
    path = journal_files(tmp_path)[0]
    with path.open("ab") as f:
        f.write(b"\x00\x00")
    assert _replay(tmp_path) == _bodies(4)


async def test_flipped_byte_in_the_last_record_is_a_torn_tail(tmp_path: Path) -> None:
    await _write(tmp_path, _bodies(10))
    path = journal_files(tmp_path)[0]
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x40
    path.write_bytes(bytes(data))
    assert _replay(tmp_path) == _bodies(9)


async def test_flipped_byte_before_the_tail_refuses_replay(tmp_path: Path) -> None:
    await _write(tmp_path, _bodies(10))
    path = journal_files(tmp_path)[0]
    data = bytearray(path.read_bytes())
    data[20] ^= 0x01  # inside the second record; acknowledged records follow it
    path.write_bytes(bytes(data))
    with pytest.raises(JournalCorruptError, match=r"corrupt at offset 17 \(CRC32C mismatch\)"):
        _replay(tmp_path)


async def test_a_failed_write_fails_its_records_with_the_journals_error_and_later_ones_too(
    tmp_path: Path,
) -> None:
    """The journal's directory is gone when a record rolls over to a new file: that record's
    add fails with a JournalError naming the directory (not a hang), and so does the next."""
    directory = tmp_path / "journal"
    j = Journal(directory, max_file_bytes=64)
    j.start(0)
    await j.append(journal.FENCE, journal.encode_fence(1))
    for path in directory.iterdir():
        path.unlink()
    directory.rmdir()
    for ledger in (2, 3):
        with pytest.raises(journal.JournalError, match=str(directory)):
            await j.append(journal.FENCE, journal.encode_fence(ledger) + bytes(64))
    await j.close()
    assert j.record_count == 1


async def test_after_close_an_append_is_refused_and_what_was_queued_is_durable(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.start(0)
    queued = [j.append(journal.FENCE, body) for body in _bodies(5)]
    await j.close()
    assert all(f.done() and f.exception() is None for f in queued)
    with pytest.raises(journal.JournalError, match="closed"):
        await j.append(journal.FENCE, journal.encode_fence(9))
    assert _replay(tmp_path) == _bodies(5)


async def test_an_open_file_is_preallocated_and_cut_back_to_its_records_at_close(tmp_path: Path) -> None:
    """The file grows by whole preallocations while records go in (an fsync then flushes data
    only), and holds exactly its records once closed."""
    j = Journal(tmp_path, prealloc_bytes=4096)
    j.start(0)
    await asyncio.gather(*(j.append(journal.FENCE, body) for body in _bodies(10)))
    path = journal_files(tmp_path)[0]
    assert path.stat().st_size == 4096  # 10 records of 17 bytes, inside the first preallocation
    await j.append(journal.FENCE, bytes(5000))  # past it: extended by a whole preallocation
    assert path.stat().st_size == 8192
    await j.close()
    assert path.stat().st_size == 10 * 17 + 8 + 1 + 5000
    assert _replay(tmp_path) == [*_bodies(10), bytes(5000)]


async def _crash_image(directory: Path, file_id: int, bodies: list[bytes]) -> bytes:
    """A file's bytes as a process killed with it open leaves them (preallocated, not cut back);
    the file is left so."""
    j = Journal(directory, prealloc_bytes=4096)
    j.start(file_id)
    for body in bodies:
        await j.append(journal.FENCE, body)
    path = journal_files(directory)[file_id]
    image = path.read_bytes()
    await j.close()
    path.write_bytes(image)
    return image


async def test_a_crash_leaves_preallocated_zeros_that_replay_reads_past(tmp_path: Path) -> None:
    """The zeros after the last record end the records (no torn tail, nothing refused), in the
    last file and in an older one alike."""
    for file_id in (0, 1):
        assert len(await _crash_image(tmp_path, file_id, _bodies(5))) == 4096
    assert _replay(tmp_path) == _bodies(5) * 2


async def test_a_record_torn_inside_preallocated_space_is_a_torn_tail(tmp_path: Path) -> None:
    data = bytearray(await _crash_image(tmp_path, 0, _bodies(5)))
    data[4 * 17 + 12] ^= 0x01  # the last record, zeros after it
    journal_files(tmp_path)[0].write_bytes(bytes(data))
    assert _replay(tmp_path) == _bodies(4)
