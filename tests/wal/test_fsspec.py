"""FileBasedWriteAheadLog on fsspec filesystems ("memory"), plus failures injected through one fs class."""

from __future__ import annotations

import logging
import os
import stat
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from wal import FileBasedWriteAheadLog, SegmentNotFoundError, WriteAheadLogError
from wal.framing import HEADER_SIZE


def test_memory_filesystem_by_url_round_trips_across_segments(memory_dir):
    with FileBasedWriteAheadLog(f"memory://{memory_dir}", rolling_interval_s=1) as log:
        handles = [log.write(b"r%d" % i, i * 400) for i in range(10)]
        assert [log.read(h) for h in handles] == [b"r%d" % i for i in range(10)]
        assert list(log.read_all()) == [b"r%d" % i for i in range(10)]
        assert len({h.path for h in handles}) == 4
        log.clean(2_000, wait_for_completion=True)
        assert list(log.read_all()) == [b"r%d" % i for i in range(3, 10)]


def test_memory_filesystem_instance_and_nothing_created_until_first_write(memory_dir):
    fs = MemoryFileSystem()
    log = FileBasedWriteAheadLog(memory_dir, filesystem=fs, close_file_after_write=True)
    assert list(log.read_all()) == []
    log.clean(10**12, wait_for_completion=True)
    assert not fs.exists(memory_dir)
    handles = [log.write(b"x%d" % i, 7) for i in range(20)]
    assert len(fs.ls(memory_dir)) == 20
    assert list(log.read_all()) == [b"x%d" % i for i in range(20)]
    assert log.read(handles[5]) == b"x5"
    log.close()


def test_memory_filesystem_torn_tail_and_missing_segment(memory_dir, caplog):
    fs = MemoryFileSystem()
    log = FileBasedWriteAheadLog(memory_dir, filesystem=fs, rolling_interval_s=1)
    handles = [log.write(b"rec%d" % i, i * 600) for i in range(6)]
    log.close()
    data = fs.cat_file(handles[-1].path)
    fs.pipe_file(handles[-1].path, data[: handles[-1].offset + HEADER_SIZE + 1])
    fs.rm_file(handles[0].path)
    with caplog.at_level(logging.WARNING, logger="wal"):
        assert list(log.read_all()) == [b"rec%d" % i for i in range(2, 5)]
    assert "torn record" in caplog.text
    with pytest.raises(SegmentNotFoundError):
        log.read(handles[0])


def test_fsspec_local_filesystem_goes_native(tmp_path):
    with FileBasedWriteAheadLog(str(tmp_path / "w"), filesystem=LocalFileSystem()) as log:
        handle = log.write(b"native", 1)
    assert stat.S_IMODE(os.stat(handle.path).st_mode) == 0o600
    with FileBasedWriteAheadLog(f"file://{tmp_path}/w") as again:
        assert list(again.read_all()) == [b"native"]


# ---------------------------------------------------------------- injected failures


class UndeletableMemoryFS(MemoryFileSystem):
    """Deleting a segment fails, as on a store that denies it."""

    cachable = False
    protocol = ("undeletable-memory",)

    def rm_file(self, path: str) -> None:
        raise PermissionError(f"delete denied: {path}")


def test_clean_deletion_errors_do_not_break_later_recovery(memory_dir, caplog):
    log = FileBasedWriteAheadLog(memory_dir, filesystem=UndeletableMemoryFS(), rolling_interval_s=1)
    for i in range(5):
        log.write(b"r%d" % i, i * 1_500)
    with caplog.at_level(logging.WARNING, logger="wal"):
        log.clean(10**12, wait_for_completion=True)
        log.clean(10**12, wait_for_completion=False)
    assert "could not delete" in caplog.text
    log.write(b"later", 7_000)
    assert list(log.read_all()) == [b"r0", b"r1", b"r2", b"r3", b"r4", b"later"]
    log.close()
    recovered = FileBasedWriteAheadLog(memory_dir, filesystem=MemoryFileSystem())
    assert list(recovered.read_all()) == [b"r0", b"r1", b"r2", b"r3", b"r4", b"later"]
    recovered.clean(10**12, wait_for_completion=True)
    assert list(recovered.read_all()) == []


class _FlakyFile:
    def __init__(self, inner: Any, fs: FlakyMemoryFS) -> None:
        self._inner = inner
        self._fs = fs

    def write(self, data: bytes) -> int:
        if self._fs.write_failures > 0:
            self._fs.write_failures -= 1
            self._inner.write(data[:3])  # a torn frame left behind in the abandoned segment
            raise OSError("injected write failure")
        return self._inner.write(data)

    def flush(self) -> None:
        self._inner.flush()

    def close(self) -> None:
        self._inner.close()


class FlakyMemoryFS(MemoryFileSystem):
    """The next ``write_failures`` writes fail after writing part of their frame."""

    cachable = False
    protocol = ("flaky-memory",)
    write_failures = 0

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        f = super()._open(path, mode, **kwargs)
        return _FlakyFile(f, self) if "w" in mode else f


def test_failed_write_is_retried_in_a_fresh_segment(memory_dir, caplog):
    fs = FlakyMemoryFS()
    log = FileBasedWriteAheadLog(memory_dir, filesystem=fs, max_failures=3)
    first = log.write(b"before", 1_000)
    fs.write_failures = 2
    with caplog.at_level(logging.WARNING, logger="wal"):
        retried = log.write(b"retried", 1_000)
    assert caplog.text.count("retrying in a new segment") == 2
    assert retried.path != first.path
    assert log.read(retried) == b"retried"
    assert len(fs.ls(memory_dir)) == 3  # the first segment, one abandoned, the one that worked
    after = log.write(b"after", 1_001)
    assert after.path == retried.path
    assert list(log.read_all()) == [b"before", b"retried", b"after"]
    log.close()


def test_write_gives_up_after_max_failures_and_the_log_stays_usable(memory_dir):
    fs = FlakyMemoryFS()
    log = FileBasedWriteAheadLog(memory_dir, filesystem=fs, max_failures=3)
    fs.write_failures = 3
    with pytest.raises(WriteAheadLogError, match="after 3 attempts") as info:
        log.write(b"lost", 1)
    assert isinstance(info.value.__cause__, OSError)
    handle = log.write(b"next", 2)
    assert log.read(handle) == b"next"
    assert list(log.read_all()) == [b"next"]
    log.close()


def test_close_after_write_on_memory_fs_recovers_in_parallel(memory_dir):
    log = FileBasedWriteAheadLog(
        memory_dir, filesystem=MemoryFileSystem(), close_file_after_write=True, recovery_threads=3
    )
    data = [b"%d" % i for i in range(40)]
    for i, record in enumerate(data):
        log.write(record, 1_000 + i // 4)
    assert list(log.read_all()) == data
    log.close()
