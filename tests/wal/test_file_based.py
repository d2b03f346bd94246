"""FileBasedWriteAheadLog against the real local filesystem: one test per BEHAVIOURS.md line, and more."""

from __future__ import annotations

import array
import logging
import os
import random
import shutil
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import wal.local_storage
from tests.wal.conftest import segment_files
from wal import (
    CorruptRecordError,
    FileBasedWriteAheadLog,
    FsyncPolicy,
    RecordHandle,
    SegmentNotFoundError,
    WriteAheadLogClosedError,
    WriteAheadLogError,
)
from wal.framing import HEADER_SIZE


def records(n: int, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [f"{i}:".encode() + rng.randbytes(rng.randint(0, 300)) for i in range(n)]


# ---------------------------------------------------------------- rolling segments


def test_records_read_back_in_write_order_across_many_segments(make_log, log_dir):
    log = make_log(rolling_interval_s=1)
    data = records(200)
    for i, record in enumerate(data):
        log.write(record, 1_000 + i * 37)
    assert len(segment_files(log_dir)) > 5
    assert list(log.read_all()) == data
    # A fresh instance (a restarted process) recovers the same thing.
    assert list(FileBasedWriteAheadLog(str(log_dir)).read_all()) == data


def test_segments_named_by_start_and_end_time(make_log, log_dir):
    log = make_log(rolling_interval_s=10)
    log.write(b"a", 5_000)
    log.write(b"b", 16_000)
    assert segment_files(log_dir) == ["log-5000-15000", "log-16000-26000"]


def test_segment_rolls_only_when_write_time_passes_segment_end(make_log, log_dir):
    log = make_log(rolling_interval_s=1)
    first = log.write(b"a", 1_000)
    at_end = log.write(b"b", 2_000)  # == end: still this segment, as Spark (time > end rolls)
    earlier = log.write(b"c", 500)  # going back in time never rolls
    past_end = log.write(b"d", 2_001)
    assert first.path == at_end.path == earlier.path
    assert past_end.path != first.path
    assert segment_files(log_dir) == ["log-1000-2000", "log-2001-3001"]
    assert list(log.read_all()) == [b"a", b"b", b"c", b"d"]


# ---------------------------------------------------------------- handles


def test_handle_reads_back_exactly_its_record(make_log):
    log = make_log(rolling_interval_s=1)
    data = [*records(50), b"", b"\x00" * 100_000]
    handles = [log.write(record, 10 * i) for i, record in enumerate(data)]
    order = list(range(len(data)))
    random.Random(1).shuffle(order)
    for i in order:
        assert log.read(handles[i]) == data[i]
    assert all(h.length == len(r) for h, r in zip(handles, data, strict=True))
    assert all(os.path.isabs(h.path) for h in handles)


def test_handle_with_mismatched_length_is_an_error(make_log):
    log = make_log()
    handle = log.write(b"hello world", 1)
    log.write(b"next record", 2)
    for wrong in (handle.length - 1, handle.length + 1, 0):
        bad = RecordHandle(handle.path, handle.offset, wrong)
        with pytest.raises(CorruptRecordError, match="length mismatch") as info:
            log.read(bad)
        assert info.value.path == handle.path
        assert info.value.offset == handle.offset
        assert handle.path in str(info.value)
        assert f"offset {handle.offset}" in str(info.value)


def test_handle_to_a_damaged_record_is_an_error(make_log):
    log = make_log()
    handle = log.write(b"payload that will be damaged", 1)
    with open(handle.path, "r+b") as f:
        f.seek(handle.offset + HEADER_SIZE + 3)
        f.write(b"X")
    with pytest.raises(CorruptRecordError, match="checksum"):
        log.read(handle)


def test_handle_with_wrong_offset_is_an_error(make_log):
    log = make_log()
    handle = log.write(b"first", 1)
    with pytest.raises(CorruptRecordError):
        log.read(RecordHandle(handle.path, handle.offset + 1, handle.length))


def test_handle_past_end_of_segment_is_an_error(make_log):
    log = make_log()
    handle = log.write(b"first", 1)
    with pytest.raises(CorruptRecordError, match="cut short"):
        log.read(RecordHandle(handle.path, handle.offset + 100, handle.length))
    with pytest.raises(CorruptRecordError, match="length mismatch"):
        log.read(RecordHandle(handle.path, handle.offset, 2**32 - 1))  # no 4 GiB allocation either


def test_record_handle_round_trips_through_a_plain_dict():
    import msgpack

    handle = RecordHandle("/data/wal/log-1-2", 1234, 56)
    as_dict = handle.to_dict()
    assert as_dict == {"path": "/data/wal/log-1-2", "offset": 1234, "length": 56}
    assert RecordHandle.from_dict(msgpack.unpackb(msgpack.packb(as_dict))) == handle
    with pytest.raises(AttributeError):
        handle.offset = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "bad",
    [
        {"path": b"/x", "offset": 0, "length": 1},
        {"path": "/x", "offset": "0", "length": 1},
        {"path": "/x", "offset": 0, "length": -1},
        {"path": "/x", "offset": True, "length": 1},
    ],
)
def test_record_handle_from_dict_rejects_wrong_types(bad):
    with pytest.raises(TypeError):
        RecordHandle.from_dict(bad)


# ---------------------------------------------------------------- torn tails and garbage


@pytest.mark.parametrize(
    "garbage", [b"\x00" * 4096, b"\xb1", bytes(range(256)) * 3, b"\xb1\x00\x00\x00\x05abc"]
)
def test_trailing_garbage_is_ignored_and_earlier_records_survive(make_log, log_dir, caplog, garbage):
    log = make_log()
    data = records(10)
    handles = [log.write(r, 1) for r in data]
    log.close()
    with open(handles[-1].path, "ab") as f:
        f.write(garbage)
    with caplog.at_level(logging.WARNING, logger="wal"):
        assert list(FileBasedWriteAheadLog(str(log_dir)).read_all()) == data
    assert handles[-1].path in caplog.text


def test_torn_last_record_is_ignored_and_earlier_records_survive(make_log, log_dir, tmp_path, caplog):
    log = make_log()
    data = records(5)
    handles = [log.write(r, 1) for r in data]
    last = handles[-1]
    segment = Path(last.path).read_bytes()
    assert len(segment) == last.offset + HEADER_SIZE + last.length
    # Every cut point inside the last frame: header torn, payload torn, one byte missing.
    for cut in range(last.offset + 1, len(segment)):
        torn_dir = tmp_path / f"torn-{cut}"
        torn_dir.mkdir()
        (torn_dir / Path(last.path).name).write_bytes(segment[:cut])
        with caplog.at_level(logging.WARNING, logger="wal"):
            assert list(FileBasedWriteAheadLog(str(torn_dir)).read_all()) == data[:-1], cut
        assert "torn record" in caplog.text
        caplog.clear()


def _damage(path: str, handle: RecordHandle, kind: str, segment_size: int) -> None:
    with open(path, "r+b") as f:
        if kind == "payload":
            f.seek(handle.offset + HEADER_SIZE)
            f.write(b"\xff")
        elif kind == "magic":
            f.seek(handle.offset)
            f.write(b"\x00")
        elif kind == "length too large":
            # Still inside the segment: the reader consumes past the next frame before the CRC fails.
            f.seek(handle.offset + 1)
            f.write((segment_size - handle.offset - HEADER_SIZE).to_bytes(4, "big"))
        else:
            f.seek(handle.offset + 1)
            f.write((handle.length // 2).to_bytes(4, "big"))


@pytest.mark.parametrize("kind", ["payload", "magic", "length too large", "length too small"])
def test_corrupt_record_is_skipped_and_reading_resumes_at_the_next_intact_record(
    make_log, log_dir, caplog, kind
):
    log = make_log(rolling_interval_s=1)
    data = records(5)
    first = [log.write(r, 1_000) for r in data]
    second_segment = [log.write(r, 5_000) for r in records(3, seed=9)]
    damaged = first[2]
    _damage(damaged.path, damaged, kind, os.path.getsize(damaged.path))
    with caplog.at_level(logging.WARNING, logger="wal"):
        recovered = list(log.read_all())
    assert recovered == [*data[:2], *data[3:], *records(3, seed=9)]
    assert f"{damaged.path} at offset {damaged.offset}" in caplog.text
    skipped = first[3].offset - damaged.offset
    assert f"skipped {skipped} bytes to the next intact record at offset {first[3].offset}" in caplog.text
    assert log.read(second_segment[0]) == records(3, seed=9)[0]
    with pytest.raises(CorruptRecordError):
        log.read(damaged)


def test_scanning_for_the_next_intact_record_reads_by_chunk_not_per_candidate(make_log, monkeypatch):
    # A damaged record full of magic bytes: every one is a candidate frame start; their headers
    # come from the scanned chunk (one read for all), only plausible ones cost a read of their own.
    log = make_log()
    damaged = log.write(b"\xb1" * 20_000, 1)
    after = log.write(b"after", 1)
    with open(damaged.path, "r+b") as f:
        f.seek(damaged.offset + HEADER_SIZE)
        f.write(b"\xb0")  # checksum mismatch
    reads = 0
    read_range = wal.local_storage.LocalStorage.read_range

    def counting(self: Any, path: str, offset: int, size: int) -> bytes:
        nonlocal reads
        reads += 1
        return read_range(self, path, offset, size)

    monkeypatch.setattr(wal.local_storage.LocalStorage, "read_range", counting)
    assert list(log.read_all()) == [b"after"]
    assert after.offset > damaged.offset
    assert reads < 10, f"{reads} reads to find the next intact record"


def test_corrupt_last_record_skips_the_rest_of_its_segment(make_log, caplog):
    log = make_log()
    data = records(3)
    handles = [log.write(r, 1) for r in data]
    _damage(handles[-1].path, handles[-1], "payload", os.path.getsize(handles[-1].path))
    with caplog.at_level(logging.WARNING, logger="wal"):
        assert list(log.read_all()) == data[:2]
    assert "checksum mismatch; no intact record after it" in caplog.text


def test_recovery_continues_in_a_new_segment_after_a_torn_tail(make_log, log_dir):
    log = make_log()
    data = records(4)
    handles = [log.write(r, 1_000) for r in data]
    log.close()
    with open(handles[-1].path, "r+b") as f:
        f.truncate(handles[-1].offset + 3)
    restarted = make_log()
    # Same time as before: the old segment's name is taken, so a new one is made, never appended to.
    new = restarted.write(b"after restart", 1_000)
    assert new.path != handles[0].path
    assert new.offset == 0
    assert list(restarted.read_all()) == [*data[:-1], b"after restart"]
    assert len(segment_files(log_dir)) == 2


def test_read_all_ignores_foreign_files(make_log, log_dir):
    log = make_log()
    log.write(b"a", 1)
    (log_dir / "README").write_text("not a segment")
    (log_dir / "log-12-abc").write_text("not a segment either")
    assert list(log.read_all()) == [b"a"]


# ---------------------------------------------------------------- missing / unreadable segments


def test_reading_a_deleted_segment_raises_a_clear_error(make_log):
    log = make_log()
    handle = log.write(b"gone soon", 1)
    log.close()
    os.unlink(handle.path)
    with pytest.raises(SegmentNotFoundError, match="not found") as info:
        log.read(handle)
    assert info.value.path == handle.path
    with pytest.raises(SegmentNotFoundError):
        log.read(RecordHandle(os.path.join(log.log_directory, "log-1-2"), 0, 1))


def test_recovery_skips_a_segment_deleted_while_reading(make_log, log_dir, caplog):
    log = make_log(rolling_interval_s=1)
    handles = [log.write(b"r%d" % i, i * 1_500) for i in range(4)]
    log.close()
    iterator = log.read_all()  # segments are listed here
    os.unlink(handles[1].path)
    with caplog.at_level(logging.WARNING, logger="wal"):
        assert list(iterator) == [b"r0", b"r2", b"r3"]
    assert "vanished" in caplog.text


def test_unreadable_truncated_segments_are_skipped_with_a_warning(make_log, log_dir, caplog):
    log = make_log(rolling_interval_s=1)
    handles = [log.write(b"record-%d" % i, i * 1_500) for i in range(4)]
    log.close()
    os.truncate(handles[1].path, 0)
    os.truncate(handles[2].path, 5)  # only part of the header is left
    with caplog.at_level(logging.WARNING, logger="wal"):
        assert list(FileBasedWriteAheadLog(str(log_dir)).read_all()) == [b"record-0", b"record-3"]
    assert handles[2].path in caplog.text


def test_read_all_of_a_missing_directory_is_empty(tmp_path):
    assert list(FileBasedWriteAheadLog(str(tmp_path / "never")).read_all()) == []


# ---------------------------------------------------------------- clean


def _three_segments(make_log):
    log = make_log(rolling_interval_s=10)
    for t in (0, 10_001, 20_002):  # segments end at 10000, 20001, 30002
        log.write(b"at %d" % t, t)
    return log


def test_clean_sync_deletes_only_segments_ending_before_threshold(make_log, log_dir):
    log = _three_segments(make_log)
    log.clean(20_001, wait_for_completion=True)  # end 20001 is not *before* 20001
    assert segment_files(log_dir) == ["log-10001-20001", "log-20002-30002"]
    assert list(log.read_all()) == [b"at 10001", b"at 20002"]


def test_clean_async_deletes_only_segments_ending_before_threshold(make_log, log_dir):
    log = _three_segments(make_log)
    log.clean(20_002, wait_for_completion=False)
    deadline = time.monotonic() + 10
    while len(segment_files(log_dir)) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert segment_files(log_dir) == ["log-20002-30002"]


def test_clean_never_deletes_the_segment_being_written(make_log, log_dir):
    log = _three_segments(make_log)
    log.clean(10**12, wait_for_completion=True)
    assert segment_files(log_dir) == ["log-20002-30002"]
    handle = log.write(b"still writable", 20_003)
    assert log.read(handle) == b"still writable"
    assert list(log.read_all()) == [b"at 20002", b"still writable"]


def test_clean_deletes_segments_left_by_an_earlier_process(make_log, log_dir):
    old = make_log(rolling_interval_s=1)
    old.write(b"old", 1_000)
    old.close()
    new = make_log(rolling_interval_s=1)
    new.write(b"new", 50_000)
    new.clean(10_000, wait_for_completion=True)
    assert list(new.read_all()) == [b"new"]


def test_a_store_that_fails_clean_after_clean_shows_one_traceback_for_the_streak(
    make_log, log_dir, monkeypatch, caplog
):
    """A store down for a while fails every clean (one per batch): the first failure of the streak
    has a traceback, the next are one line each, and the first clean that works again says so."""
    log = _three_segments(make_log)
    caplog.set_level(logging.DEBUG, logger="wal.file_based")
    listing = wal.local_storage.LocalStorage.list_entries
    deleting = wal.local_storage.LocalStorage.delete

    def down(self: Any, *args: Any) -> Any:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(wal.local_storage.LocalStorage, "list_entries", down)
    log.clean(20_002, wait_for_completion=True)
    log.clean(20_002, wait_for_completion=True)
    monkeypatch.setattr(wal.local_storage.LocalStorage, "list_entries", listing)
    monkeypatch.setattr(wal.local_storage.LocalStorage, "delete", down)
    log.clean(20_002, wait_for_completion=True)
    assert len(segment_files(log_dir)) == 3
    monkeypatch.setattr(wal.local_storage.LocalStorage, "delete", deleting)
    log.clean(20_002, wait_for_completion=True)
    assert segment_files(log_dir) == ["log-20002-30002"]

    lines = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    cleans = [line for line in lines if "clean of" in line[1]]
    directory = log.log_directory
    assert cleans[0][0] == "WARNING" and cleans[0][2]
    assert cleans[0][1].startswith(f"write-ahead log clean of {directory} failed (listing its segments): ")
    assert [(level, traceback) for level, _, traceback in cleans[1:]] == [("WARNING", False)] * 3
    assert cleans[1][1].startswith(
        f"write-ahead log clean of {directory} failed again (listing its segments)"
    )
    assert "failed again (deleting 2 of 2 segment(s), " in cleans[2][1]
    assert cleans[3][1].startswith(f"write-ahead log clean of {directory} succeeded again after 3 failure(s)")


def test_clean_on_an_empty_log_creates_nothing(make_log, log_dir):
    log = make_log()
    log.clean(10**12, wait_for_completion=True)
    log.clean(10**12, wait_for_completion=False)
    log.close()
    assert not log_dir.exists()


# ---------------------------------------------------------------- disk footprint


def test_nothing_is_created_on_disk_until_the_first_write(make_log, tmp_path):
    root = tmp_path / "a"
    log = make_log(directory=root / "b" / "c")
    assert list(log.read_all()) == []
    log.clean(10**12, wait_for_completion=True)
    assert not root.exists()
    handle = log.write(b"first", 1)
    for level in (root, root / "b", root / "b" / "c"):
        assert stat.S_IMODE(level.stat().st_mode) == 0o700, level
    assert stat.S_IMODE(os.stat(handle.path).st_mode) == 0o600


def test_files_are_owner_only_whatever_the_umask(make_log, log_dir):
    previous = os.umask(0)
    try:
        handle = make_log().write(b"x", 1)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(os.stat(handle.path).st_mode) == 0o600


def test_directory_removed_under_a_running_log_is_recreated(make_log, log_dir):
    log = make_log(close_file_after_write=True)
    log.write(b"a", 1)
    shutil.rmtree(log_dir)
    handle = log.write(b"b", 2)
    assert log.read(handle) == b"b"


# ---------------------------------------------------------------- close-after-write


def test_close_after_write_writes_one_segment_per_write(make_log, log_dir):
    log = make_log(close_file_after_write=True)
    data = records(30)
    handles = [log.write(r, 5_000) for r in data]  # same time for all: names must still be unique
    assert len(segment_files(log_dir)) == 30
    assert len({h.path for h in handles}) == 30
    assert all(h.offset == 0 for h in handles)
    assert [log.read(h) for h in handles] == data
    assert list(log.read_all()) == data


def test_close_after_write_recovers_segments_in_parallel(make_log, log_dir, monkeypatch):
    log = make_log(close_file_after_write=True, recovery_threads=4)
    data = records(120)
    for i, r in enumerate(data):
        log.write(r, i)
    import wal.recovery

    threads: set[str] = set()
    original = wal.recovery.iter_segment

    def recording(storage, path):
        threads.add(threading.current_thread().name)
        time.sleep(0.002)  # a slow store: what parallel recovery is for
        yield from original(storage, path)

    monkeypatch.setattr(wal.recovery, "iter_segment", recording)
    assert list(log.read_all()) == data
    assert len(threads) > 1
    assert all(name.startswith("wal-recovery") for name in threads)


def test_close_after_write_recovery_stopped_early_releases_its_threads(make_log):
    log = make_log(close_file_after_write=True)
    for i in range(50):
        log.write(b"%d" % i, i)
    iterator = log.read_all()
    assert next(iterator) == b"0"
    iterator.close()  # type: ignore[attr-defined]
    assert not [t for t in threading.enumerate() if t.name.startswith("wal-recovery")]


# ---------------------------------------------------------------- durability, life cycle


@pytest.mark.parametrize("fsync", [True, False, FsyncPolicy.FDATASYNC, FsyncPolicy.NONE, "fsync"])
def test_every_fsync_policy_writes_readable_records(make_log, fsync):
    log = make_log(fsync=fsync, rolling_interval_s=1)
    data = records(20)
    handles = [log.write(r, i * 100) for i, r in enumerate(data)]
    assert [log.read(h) for h in handles] == data
    assert list(log.read_all()) == data


def test_fsync_policy_coercion():
    assert FsyncPolicy.coerce(True) is FsyncPolicy.FSYNC
    assert FsyncPolicy.coerce(False) is FsyncPolicy.NONE
    assert FsyncPolicy.coerce("fdatasync") is FsyncPolicy.FDATASYNC


def test_write_after_close_raises_but_reads_still_work(make_log):
    log = make_log()
    handle = log.write(b"a", 1)
    log.close()
    log.close()  # harmless
    with pytest.raises(WriteAheadLogClosedError):
        log.write(b"b", 2)
    log.clean(10, wait_for_completion=True)  # ignored, as in Spark
    assert log.read(handle) == b"a"
    assert list(log.read_all()) == [b"a"]


def test_context_manager_closes_the_log(log_dir):
    with FileBasedWriteAheadLog(str(log_dir)) as log:
        log.write(b"a", 1)
    with pytest.raises(WriteAheadLogClosedError):
        log.write(b"b", 2)


def test_invalid_arguments_are_rejected(make_log):
    with pytest.raises(ValueError):
        make_log(rolling_interval_s=0)
    with pytest.raises(ValueError):
        make_log(max_failures=0)
    log = make_log()
    with pytest.raises(ValueError):
        log.write(b"x", -1)
    with pytest.raises(TypeError):
        log.write(b"x", 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        log.write("text", 1)  # type: ignore[arg-type]


def test_concurrent_writers_lose_nothing(make_log):
    log = make_log(rolling_interval_s=1, fsync=False)
    handles: dict[bytes, RecordHandle] = {}
    lock = threading.Lock()

    def writer(n: int) -> None:
        for i in range(200):
            record = b"%d-%d" % (n, i)
            handle = log.write(record, i * 20)
            with lock:
                handles[record] = handle

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(log.read_all()) == sorted(handles)
    assert all(log.read(h) == r for r, h in handles.items())


# ---------------------------------------------------------------- audit fixes


def test_default_rolling_interval_is_sixty_seconds(make_log, log_dir):
    log = make_log()
    log.write(b"a", 0)
    log.write(b"b", 60_000)
    assert segment_files(log_dir) == ["log-0-60000"]
    log.write(b"c", 60_001)
    assert segment_files(log_dir) == ["log-0-60000", "log-60001-120001"]


def test_restarted_log_with_an_earlier_clock_still_reads_back_in_write_order(make_log, log_dir):
    first = make_log(rolling_interval_s=1)
    first.write(b"before restart", 10_000)
    first.close()
    restarted = make_log(rolling_interval_s=1)
    restarted.write(b"after restart, clock went back", 5_000)
    assert list(restarted.read_all()) == [b"before restart", b"after restart, clock went back"]


def test_multi_byte_memoryview_is_framed_by_its_byte_length(make_log):
    log = make_log()
    values = array.array("I", [1, 2, 3, 0xFFFFFFFF])
    handle = log.write(memoryview(values), 1)
    assert handle.length == values.itemsize * len(values)
    assert log.read(handle) == values.tobytes()
    assert list(log.read_all()) == [values.tobytes()]
    with pytest.raises(TypeError, match="bytes-like"):
        log.write("text", 2)  # type: ignore[arg-type]


def test_read_rejects_a_handle_outside_the_log_directory(make_log, tmp_path):
    log = make_log()
    other = make_log(directory=tmp_path / "other")
    foreign = other.write(b"not yours", 1)
    log.write(b"mine", 1)
    for path in (
        foreign.path,
        os.path.join(log.log_directory, "..", "other", os.path.basename(foreign.path)),
    ):
        with pytest.raises(WriteAheadLogError, match="not a segment of write-ahead log"):
            log.read(RecordHandle(path, foreign.offset, foreign.length))
    with pytest.raises(WriteAheadLogError, match="not a segment"):
        log.read(RecordHandle(os.path.join(log.log_directory, "README"), 0, 1))


@pytest.mark.parametrize(
    ("policy", "file_fsyncs", "fdatasyncs", "directory_fsyncs"),
    [(FsyncPolicy.FSYNC, 3, 0, 1), (FsyncPolicy.FDATASYNC, 0, 3, 1), (FsyncPolicy.NONE, 0, 0, 0)],
)
def test_sync_calls_per_policy(
    make_log, log_dir, monkeypatch, policy, file_fsyncs, fdatasyncs, directory_fsyncs
):
    log_dir.mkdir()  # only the segment's own directory entry is synced, no parents created
    calls: list[tuple[str, bool]] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: int) -> None:
        calls.append(("fsync", stat.S_ISDIR(os.fstat(fd).st_mode)))
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        calls.append(("fdatasync", stat.S_ISDIR(os.fstat(fd).st_mode)))
        real_fdatasync(fd)

    monkeypatch.setattr(wal.local_storage.os, "fsync", fsync)
    monkeypatch.setattr(wal.local_storage.os, "fdatasync", fdatasync)
    log = make_log(fsync=policy)
    for i in range(3):
        log.write(b"r%d" % i, 1)
    assert calls.count(("fsync", False)) == file_fsyncs
    assert calls.count(("fdatasync", False)) == fdatasyncs
    assert calls.count(("fsync", True)) == directory_fsyncs
    assert len(calls) == file_fsyncs + fdatasyncs + directory_fsyncs


def _fail_on_regular_files(real: Any, failures: list[int]) -> Any:
    def call(fd: int, *args: Any) -> Any:
        if failures[0] > 0 and stat.S_ISREG(os.fstat(fd).st_mode):
            failures[0] -= 1
            raise OSError(5, "injected I/O error")
        return real(fd, *args)

    return call


@pytest.mark.parametrize("syscall", ["writev", "fsync"])
def test_local_write_failing_once_is_retried_in_a_fresh_segment(make_log, log_dir, monkeypatch, syscall):
    failures = [0]
    monkeypatch.setattr(wal.local_storage.os, syscall, _fail_on_regular_files(getattr(os, syscall), failures))
    log = make_log(max_failures=3)
    first = log.write(b"before", 1)
    failures[0] = 1
    retried = log.write(b"retried", 1)
    assert failures == [0]
    assert retried.path != first.path
    assert log.read(retried) == b"retried"
    assert len(segment_files(log_dir)) == 2  # the first (abandoned on the failure) and a fresh one
    # A failed fsync came after the bytes landed: recovery may return that record twice.
    recovered = list(log.read_all())
    assert recovered[0] == b"before" and recovered[-1] == b"retried"
    assert set(recovered) == {b"before", b"retried"}


@pytest.mark.parametrize("syscall", ["writev", "fsync"])
def test_local_write_failing_max_failures_times_raises(make_log, monkeypatch, syscall):
    log = make_log(max_failures=3)
    failures = [3]
    monkeypatch.setattr(wal.local_storage.os, syscall, _fail_on_regular_files(getattr(os, syscall), failures))
    with pytest.raises(WriteAheadLogError, match="after 3 attempts"):
        log.write(b"lost", 1)
    assert failures == [0]
    assert log.read(log.write(b"next", 2)) == b"next"
