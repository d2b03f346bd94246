"""A write-ahead log on a disk that really fills up (a small tmpfs: ENOSPC from the kernel).

A full disk must cost writes, never records: every write that returned reads back intact,
recovery does not raise on the torn frames the failed writes leave, and once space is freed
(old segments cleaned) the same log writes again.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from tests.small_disk import free_bytes, small_tmpfs
from wal import BatchedWriteAheadLog, FileBasedWriteAheadLog, RecordHandle, WriteAheadLogError

DISK_BYTES = 256 * 1024
RECORD_BYTES = 4096


def record(i: int) -> bytes:
    return i.to_bytes(4, "big") * (RECORD_BYTES // 4)


def caused_by_enospc(error: BaseException) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def fill(
    log: FileBasedWriteAheadLog, first: int
) -> tuple[list[tuple[int, RecordHandle]], WriteAheadLogError]:
    """Write records until the disk is full; times 2 s apart with 1 s rolling: a segment per record."""
    acked: list[tuple[int, RecordHandle]] = []
    for i in range(first, first + 10 * DISK_BYTES // RECORD_BYTES):
        try:
            acked.append((i, log.write(record(i), i * 2000)))
        except WriteAheadLogError as exc:
            return acked, exc
    raise AssertionError("the disk never filled up")


def test_full_disk_fails_writes_loses_no_acknowledged_record_and_recovers_once_space_is_freed(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        directory = str(disk / "wal")
        log = FileBasedWriteAheadLog(directory, rolling_interval_s=1)
        acked, error = fill(log, 0)
        assert len(acked) > 10, "the disk filled before the test began"
        assert caused_by_enospc(error), f"expected ENOSPC behind {error!r}"
        assert free_bytes(disk) < RECORD_BYTES + 64

        for i, handle in acked:
            assert log.read(handle) == record(i)
        log.close()
        # A fresh process's recovery: every acknowledged record, in order, nothing else.
        with FileBasedWriteAheadLog(directory, rolling_interval_s=1) as recovered:
            assert list(recovered.read_all()) == [record(i) for i, _ in acked]

            # Free half the disk by cleaning the older half; the log writes again.
            keep_from = acked[len(acked) // 2][0]
            recovered.clean(keep_from * 2000, wait_for_completion=True)
            more, _ = fill(recovered, acked[-1][0] + 1)
            assert more, "no write succeeded after space was freed"
            expected = [record(i) for i, _ in acked if i >= keep_from] + [record(i) for i, _ in more]
        with FileBasedWriteAheadLog(directory, rolling_interval_s=1) as recovered:
            assert list(recovered.read_all()) == expected


def test_batched_log_on_a_full_disk_fails_every_waiting_writer_and_keeps_every_acknowledged_record(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        directory = str(disk / "wal")
        log = BatchedWriteAheadLog(FileBasedWriteAheadLog(directory))
        acked: list[int] = []
        failures: list[BaseException] = []
        lock = threading.Lock()

        def writer(w: int) -> None:
            for n in range(DISK_BYTES // RECORD_BYTES):
                i = w * 1000 + n
                try:
                    log.write(record(i), 1000)
                except WriteAheadLogError as exc:
                    with lock:
                        failures.append(exc)
                    return
                with lock:
                    acked.append(i)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "a writer hung on the full disk"
        log.close()
        # 8 writers x 64 records of 4 KiB cannot fit in 256 KiB: every writer ends on an error.
        assert len(failures) == 8
        assert all(caused_by_enospc(f) for f in failures)
        with BatchedWriteAheadLog(FileBasedWriteAheadLog(directory)) as recovered:
            assert sorted(recovered.read_all()) == sorted(record(i) for i in acked)


@pytest.mark.parametrize("size", [DISK_BYTES])
def test_the_small_disk_really_is_small(tmp_path: Path, size: int) -> None:
    """Guards the two tests above: writing past the tmpfs size fails with ENOSPC."""
    with small_tmpfs(tmp_path / "disk", size) as disk:
        target = disk / "filler"
        with pytest.raises(OSError) as raised, target.open("wb") as f:
            f.write(b"\0" * (size + 4096))
            f.flush()
        assert raised.value.errno == errno.ENOSPC
