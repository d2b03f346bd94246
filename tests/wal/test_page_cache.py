"""Synced WAL records leave the page cache: the segment writer advises the kernel to drop each
record's pages once they are on disk, and only then (unsynced pages are dirty: advice would not
drop them, and dropping must never lose a write)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import wal.local_storage
from wal import FileBasedWriteAheadLog, FsyncPolicy

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")


def _advice_log(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int, int]]:
    calls: list[tuple[str, int, int, int]] = []
    fadvise, fsync = os.posix_fadvise, os.fsync

    def recording_fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        calls.append(("fadvise", offset, length, advice))
        fadvise(fd, offset, length, advice)

    def recording_fsync(fd: int) -> None:
        calls.append(("fsync", 0, 0, 0))
        fsync(fd)

    monkeypatch.setattr(wal.local_storage.os, "posix_fadvise", recording_fadvise)
    monkeypatch.setattr(wal.local_storage.os, "fsync", recording_fsync)
    return calls


def test_each_synced_record_is_dropped_from_the_page_cache_after_its_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _advice_log(monkeypatch)
    log = FileBasedWriteAheadLog(str(tmp_path), fsync=FsyncPolicy.FSYNC)
    records = [b"a" * 10_000, b"b" * 70_000]
    handles = [log.write(record, 1000 + i) for i, record in enumerate(records)]
    advised = [(offset, length) for name, offset, length, _ in calls if name == "fadvise"]
    names = [name for name, *_ in calls]
    assert len(advised) == 2
    # Each advice right after a sync (a new segment's directory is synced too, before its first).
    assert all(names[i - 1] == "fsync" for i, name in enumerate(names) if name == "fadvise")
    assert {advice for name, _, _, advice in calls if name == "fadvise"} == {os.POSIX_FADV_DONTNEED}
    # Each record's whole frame (header + payload), back to back.
    assert advised[0][0] == 0 and advised[1][0] == advised[0][1]
    assert [length for _, length in advised] == [advised[0][1], advised[1][1]]
    assert advised[1][1] - advised[0][1] == len(records[1]) - len(records[0])
    # Dropped from the cache, not from the log.
    assert [log.read(handle) for handle in handles] == records
    log.close()


def test_unsynced_records_are_not_advised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _advice_log(monkeypatch)
    log = FileBasedWriteAheadLog(str(tmp_path), fsync=FsyncPolicy.NONE)
    handle = log.write(b"payload", 1000)
    assert calls == []
    assert log.read(handle) == b"payload"
    log.close()
