"""FileBasedWriteAheadLog on fsspec filesystems ("memory"), plus failures injected through one fs class."""

from __future__ import annotations

import io
import logging
import os
import re
import stat
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

from wal import FileBasedWriteAheadLog, SegmentNotFoundError, WriteAheadLogError
from wal.framing import HEADER_SIZE
from wal.fsspec_storage import FsspecStorage
from wal.recovery import iter_segment


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
    protocol = ("undeletable-memory", "memory")  # "memory": flushed writes are in the store

    def rm_file(self, path: str) -> None:
        raise PermissionError(f"delete denied: {path}")


def test_clean_deletion_errors_do_not_break_later_recovery(memory_dir, caplog):
    log = FileBasedWriteAheadLog(memory_dir, filesystem=UndeletableMemoryFS(), rolling_interval_s=1)
    for i in range(5):
        log.write(b"r%d" % i, i * 1_500)
    with caplog.at_level(logging.WARNING, logger="wal"):
        log.clean(10**12, wait_for_completion=True)
        log.clean(10**12, wait_for_completion=False)
    assert "clean of " in caplog.text and " failed (deleting 4 of 4 segment(s), " in caplog.text
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
    protocol = ("flaky-memory", "memory")  # "memory": flushed writes are in the store
    write_failures = 0

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        f = super()._open(path, mode, **kwargs)
        return _FlakyFile(f, self) if "w" in mode or "x" in mode else f


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


# ---------------------------------------------------------------- stores that publish only on close


class _UploadOnClose:
    """An object-store file: writes and flushes stay in this process until close uploads them."""

    def __init__(self, fs: UploadOnCloseFS, path: str) -> None:
        self._fs = fs
        self._path = path
        self._buffer = io.BytesIO()

    def write(self, data: bytes) -> int:
        return self._buffer.write(data)

    def flush(self) -> None:
        pass  # as fsspec's buffered files do until a whole block is buffered

    def close(self) -> None:
        if self._fs.close_failures > 0:
            self._fs.close_failures -= 1
            raise OSError("injected upload failure")
        MemoryFile(self._fs, self._path, self._buffer.getvalue()).commit()


class UploadOnCloseFS(MemoryFileSystem):
    """Behaves like S3/GCS through fsspec: an object appears only when its file is closed."""

    cachable = False
    protocol = ("upload-on-close",)
    close_failures = 0

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if "r" in mode:
            return super()._open(path, mode, **kwargs)
        path = self._strip_protocol(path)
        if "x" in mode and self.exists(path):
            raise FileExistsError(path)
        return _UploadOnClose(self, path)


def test_store_publishing_only_on_close_forces_close_after_write_with_one_warning(memory_dir, caplog):
    fs = UploadOnCloseFS()
    log = FileBasedWriteAheadLog(memory_dir, filesystem=fs, close_file_after_write=False)
    with caplog.at_level(logging.WARNING, logger="wal"):
        for i in range(3):
            log.write(b"r%d" % i, 1_000)
            # Another process (a restarted receiver) sees every acknowledged record in the store.
            assert list(FileBasedWriteAheadLog(memory_dir, filesystem=fs).read_all()) == [
                b"r%d" % j for j in range(i + 1)
            ]
    assert caplog.text.count("close_file_after_write forced on") == 1
    assert len(fs.ls(memory_dir)) == 3
    log.close()
    # A relaunched receiver's new log on the same directory: said once per process already.
    with (
        caplog.at_level(logging.WARNING, logger="wal"),
        FileBasedWriteAheadLog(memory_dir, filesystem=fs, close_file_after_write=False) as again,
    ):
        again.write(b"r3", 2_000)
    assert caplog.text.count("close_file_after_write forced on") == 1


def test_upload_failing_on_close_is_retried_as_the_writes_own_failure(memory_dir):
    fs = UploadOnCloseFS()
    log = FileBasedWriteAheadLog(memory_dir, filesystem=fs, max_failures=2)
    fs.close_failures = 1
    handle = log.write(b"uploaded on the second attempt", 1)
    assert log.read(handle) == b"uploaded on the second attempt"
    log.close()


class PermissionAfterUploadFS(UploadOnCloseFS):
    """WebHDFS as the log sees it: the upload, then a separate permission call that can fail
    after the object is already in the store."""

    protocol = ("permission-after-upload",)
    chmod_failures = 0

    def chmod(self, path: str, mode: int) -> None:
        if self.chmod_failures > 0 and self.isfile(path):
            self.chmod_failures -= 1
            raise OSError("SETPERMISSION timed out")


def test_a_write_failing_after_its_upload_landed_is_recovered_once(memory_dir):
    fs = PermissionAfterUploadFS()
    log = FileBasedWriteAheadLog(memory_dir, filesystem=fs, max_failures=3)
    fs.chmod_failures = 1
    handle = log.write(b"landed, then the permission change failed", 1)
    assert log.read(handle) == b"landed, then the permission change failed"
    assert list(log.read_all()) == [b"landed, then the permission change failed"]
    # A write reported failed leaves nothing to recover either.
    fs.chmod_failures = 3
    with pytest.raises(WriteAheadLogError):
        log.write(b"reported failed", 2)
    assert list(log.read_all()) == [b"landed, then the permission change failed"]
    log.close()


class _FailingCloseFile(_FlakyFile):
    def close(self) -> None:
        if self._fs.close_failures > 0:
            self._fs.close_failures -= 1
            raise OSError("injected close failure")
        self._inner.close()


class FailingCloseMemoryFS(FlakyMemoryFS):
    cachable = False
    close_failures = 0

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        f = MemoryFileSystem._open(self, path, mode, **kwargs)
        return _FailingCloseFile(f, self) if "w" in mode or "x" in mode else f


def test_failed_close_of_a_rolled_segment_names_it_and_is_not_retried_as_the_new_write(memory_dir, caplog):
    fs = FailingCloseMemoryFS()
    log = FileBasedWriteAheadLog(memory_dir, filesystem=fs, rolling_interval_s=1, max_failures=3)
    first = log.write(b"acknowledged", 1_000)
    fs.close_failures = 1
    with caplog.at_level(logging.WARNING, logger="wal"), pytest.raises(WriteAheadLogError) as info:
        log.write(b"next segment", 5_000)
    assert first.path in str(info.value)
    assert "retrying" not in caplog.text
    assert fs.ls(memory_dir, detail=False) == [first.path]  # the new record was not written
    later = log.write(b"later", 6_000)
    assert list(log.read_all()) == [b"acknowledged", b"later"]
    assert later.path != first.path
    log.close()


# ---------------------------------------------------------------- exclusive create, permissions, errors


class RacingMemoryFS(MemoryFileSystem):
    """exists() answers False, as it does when another writer creates the name right after."""

    cachable = False
    protocol = ("racing-memory", "memory")

    def exists(self, path: str, **kwargs: Any) -> bool:
        return False

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        # The store itself still knows: exclusive create is atomic there.
        if "x" in mode and self._strip_protocol(path) in self.store:
            raise FileExistsError(path)
        return super()._open(path, mode, **kwargs)


class RacingNoExclusiveMemoryFS(RacingMemoryFS):
    """A back end that knows no "xb" mode, racing with another writer."""

    protocol = ("racing-no-exclusive-memory", "memory")

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if "x" in mode:
            raise ValueError(f"unsupported mode {mode}")
        return super()._open(path, mode, **kwargs)


@pytest.mark.parametrize("fs_class", [RacingMemoryFS, RacingNoExclusiveMemoryFS])
def test_segment_creation_never_truncates_a_segment_a_racing_writer_created(memory_dir, fs_class):
    fs = fs_class()
    storage = FsspecStorage(fs, memory_dir)
    taken = storage.join("log-1-2")
    fs.pipe_file(taken, b"the other writer's records")
    try:
        writer = storage.create_segment(taken)
    except FileExistsError:
        assert fs_class is RacingMemoryFS
    else:
        assert fs_class is RacingNoExclusiveMemoryFS
        assert writer.path.startswith(taken + ".")  # a name no other writer can pick
        writer.append(b"", b"mine")
        writer.close()
    assert fs.cat_file(taken) == b"the other writer's records"


class NoExclusiveMemoryFS(MemoryFileSystem):
    cachable = False
    protocol = ("no-exclusive-memory", "memory")

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if "x" in mode:
            raise ValueError(f"unsupported mode {mode}")
        return super()._open(path, mode, **kwargs)


def test_without_exclusive_create_uniquely_named_segments_read_back_in_order(memory_dir):
    with FileBasedWriteAheadLog(memory_dir, filesystem=NoExclusiveMemoryFS(), rolling_interval_s=1) as log:
        handles = [log.write(b"r%d" % i, i * 700) for i in range(4)]
        assert len({h.path for h in handles}) == 2
        assert all(re.fullmatch(r".*/log-\d+-\d+\.[0-9a-f]{32}", h.path) for h in handles)
        assert [log.read(h) for h in handles] == [b"r%d" % i for i in range(4)]
        assert list(log.read_all()) == [b"r%d" % i for i in range(4)]


class ChmodMemoryFS(MemoryFileSystem):
    """A store with a working chmod (WebHDFS has one); records the calls."""

    cachable = False
    protocol = ("chmod-memory", "memory")

    def __init__(self) -> None:
        super().__init__()
        self.modes: dict[str, int] = {}

    def chmod(self, path: str, mode: int) -> None:
        self.modes[self._strip_protocol(path)] = mode


def test_owner_only_permissions_where_the_store_has_chmod(memory_dir):
    fs = ChmodMemoryFS()
    with FileBasedWriteAheadLog(f"{memory_dir}/nested", filesystem=fs, rolling_interval_s=1) as log:
        handles = [log.write(b"r%d" % i, i * 1_500) for i in range(2)]
    assert fs.modes == {f"{memory_dir}/nested": 0o700, handles[0].path: 0o600, handles[1].path: 0o600}


class BrokenBackendFS(MemoryFileSystem):
    """Raises what S3/GCS clients raise: exceptions that are not OSError."""

    cachable = False
    protocol = ("broken-memory", "memory")
    broken = False

    def cat_file(self, path: str, start: Any = None, end: Any = None, **kwargs: Any) -> Any:
        if self.broken:
            raise RuntimeError("service unavailable")
        return super().cat_file(path, start=start, end=end, **kwargs)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        if self.broken:
            raise RuntimeError("service unavailable")
        return super().ls(path, detail=detail, **kwargs)


def test_back_end_errors_that_are_not_oserror_come_out_as_write_ahead_log_errors(memory_dir):
    fs = BrokenBackendFS()
    log = FileBasedWriteAheadLog(memory_dir, filesystem=fs)
    handle = log.write(b"r", 1)
    log.close()
    fs.broken = True
    with pytest.raises(WriteAheadLogError, match="service unavailable"):
        log.read(handle)
    with pytest.raises(WriteAheadLogError, match="service unavailable"):
        list(log.read_all())
    with pytest.raises(WriteAheadLogError, match="service unavailable"):
        list(iter_segment(FsspecStorage(fs, memory_dir), handle.path))


def test_corrupt_record_on_fsspec_is_skipped_and_reading_resumes_after_it(memory_dir, caplog):
    fs = MemoryFileSystem()
    log = FileBasedWriteAheadLog(memory_dir, filesystem=fs)
    data = [b"r%d" % i * 50 for i in range(5)]
    handles = [log.write(r, 1) for r in data]
    log.close()
    segment = bytearray(fs.cat_file(handles[0].path))
    # A bogus length that still fits: the sequential reader runs past the next frame first.
    segment[handles[1].offset + 1 : handles[1].offset + HEADER_SIZE - 4] = (
        len(segment) - handles[1].offset - HEADER_SIZE
    ).to_bytes(4, "big")
    fs.pipe_file(handles[0].path, bytes(segment))
    with caplog.at_level(logging.WARNING, logger="wal"):
        assert list(log.read_all()) == [data[0], *data[2:]]
    assert f"to the next intact record at offset {handles[2].offset}" in caplog.text
