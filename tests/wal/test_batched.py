"""BatchedWriteAheadLog (group commit) on top of a real FileBasedWriteAheadLog."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.support import wait_until
from wal import (
    BatchedWriteAheadLog,
    CorruptRecordError,
    FileBasedWriteAheadLog,
    RecordHandle,
    UnsupportedOperationError,
    WriteAheadLogClosedError,
    WriteAheadLogError,
)
from wal.aggregate import aggregate, deaggregate


class GatedLog(FileBasedWriteAheadLog):
    """A real file log whose writes are recorded, can be held at a gate, and can be made to fail."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory, fsync=False)
        self.writes: list[tuple[list[bytes], int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.error: Exception | None = None
        self.closed = False

    def write(self, record: bytes, time_ms: int) -> RecordHandle:
        self.writes.append((deaggregate(record), time_ms))
        self.entered.set()
        self.gate.wait(10)
        if self.error is not None:
            raise self.error
        return super().write(record, time_ms)

    def close(self) -> None:
        self.closed = True
        super().close()


@pytest.fixture
def gated(tmp_path) -> GatedLog:
    return GatedLog(str(tmp_path / "wal"))


def run_writers(
    log: BatchedWriteAheadLog, items: list[tuple[bytes, int]]
) -> tuple[list[threading.Thread], dict]:
    outcome: dict[bytes, Any] = {}

    def one(record: bytes, time_ms: int) -> None:
        try:
            outcome[record] = log.write(record, time_ms)
        except Exception as exc:
            outcome[record] = exc

    threads = [threading.Thread(target=one, args=item) for item in items]
    for t in threads:
        t.start()
    return threads, outcome


def queued(log: BatchedWriteAheadLog) -> int:
    return len(log._queue._items)


def hold_first_write(log: BatchedWriteAheadLog, gated: GatedLog) -> tuple[list[threading.Thread], dict]:
    """Start one write and keep it inside the wrapped log, so that later writes queue up."""
    gated.gate.clear()
    threads, outcome = run_writers(log, [(b"first", 5)])
    assert gated.entered.wait(10)
    return threads, outcome


def test_batched_concurrent_writes_are_aggregated_into_one_write_stamped_with_largest_time(gated):
    log = BatchedWriteAheadLog(gated)
    first_threads, first = hold_first_write(log, gated)
    items = [(b"t30", 30), (b"t10", 10), (b"t40", 40), (b"t20", 20)]
    threads, outcome = run_writers(log, items)
    wait_until(lambda: queued(log) == 4)
    gated.gate.set()
    for t in first_threads + threads:
        t.join(10)
    assert gated.writes == [([b"first"], 5), ([b"t10", b"t20", b"t30", b"t40"], 40)]
    handles = {outcome[r] for r, _ in items}
    assert len(handles) == 1  # every writer of a batch gets the batch's handle
    assert handles != {first[b"first"]}
    assert log.read_batch(handles.pop()) == [b"t10", b"t20", b"t30", b"t40"]
    assert list(log.read_all()) == [b"first", b"t10", b"t20", b"t30", b"t40"]
    log.close()


def test_batched_failures_of_the_inner_log_reach_every_waiting_writer(gated):
    log = BatchedWriteAheadLog(gated)
    first_threads, first = hold_first_write(log, gated)
    items = [(b"w%d" % i, i) for i in range(6)]
    threads, outcome = run_writers(log, items)
    wait_until(lambda: queued(log) == 6)
    gated.error = OSError("inner log broke")
    gated.gate.set()
    for t in first_threads + threads:
        t.join(10)
    for result in [first[b"first"], *(outcome[r] for r, _ in items)]:
        assert isinstance(result, WriteAheadLogError)
        assert isinstance(result.__cause__, OSError)
        assert "inner log broke" in str(result)
    # Each writer got its own exception object.
    assert len({id(outcome[r]) for r, _ in items}) == 6
    # The batched log survives an inner failure.
    gated.error = None
    assert log.read_batch(log.write(b"recovered", 100)) == [b"recovered"]
    log.close()


def test_batched_write_after_close_raises(gated):
    log = BatchedWriteAheadLog(gated)
    log.write(b"a", 1)
    log.close()
    log.close()  # harmless
    with pytest.raises(WriteAheadLogClosedError):
        log.write(b"b", 2)
    assert gated.closed


def test_batched_pending_writes_fail_on_shutdown(gated):
    log = BatchedWriteAheadLog(gated)
    first_threads, first = hold_first_write(log, gated)
    items = [(b"p%d" % i, i) for i in range(5)]
    threads, outcome = run_writers(log, items)
    wait_until(lambda: queued(log) == 5)
    closer = threading.Thread(target=log.close)
    closer.start()
    for t in threads:
        t.join(10)
    # Queued writes fail at once, while the batch in flight is still inside the wrapped log.
    assert all(isinstance(outcome[r], WriteAheadLogClosedError) for r, _ in items)
    assert "closed before the write with time" in str(outcome[b"p0"])
    gated.gate.set()
    closer.join(10)
    for t in first_threads:
        t.join(10)
    assert isinstance(first[b"first"], RecordHandle)  # the batch in flight completes
    assert gated.closed
    assert list(gated.read_all()) == [aggregate([b"first"])]


def test_batched_close_gives_up_on_a_stuck_inner_write_after_the_timeout(gated):
    log = BatchedWriteAheadLog(gated, close_timeout_s=0.2)
    first_threads, first = hold_first_write(log, gated)
    started = time.monotonic()
    log.close()
    assert time.monotonic() - started < 5
    first_threads[0].join(10)
    assert isinstance(first[b"first"], WriteAheadLogClosedError)
    assert not gated.closed  # still in use by the stuck write
    gated.gate.set()
    wait_until(lambda: gated.closed)


def test_batched_read_is_unsupported_and_read_batch_deaggregates(gated):
    log = BatchedWriteAheadLog(gated)
    handle = log.write(b"only", 1)
    with pytest.raises(UnsupportedOperationError, match="read_batch"):
        log.read(handle)
    assert log.read_batch(handle) == [b"only"]
    log.close()


def test_batched_read_all_deaggregates_in_write_order(tmp_path):
    with BatchedWriteAheadLog(FileBasedWriteAheadLog(str(tmp_path / "w"), rolling_interval_s=1)) as log:
        data = [b"rec%d" % i for i in range(50)]
        for i, record in enumerate(data):
            log.write(record, i * 100)
        assert list(log.read_all()) == data
    reopened = BatchedWriteAheadLog(FileBasedWriteAheadLog(str(tmp_path / "w")))
    assert list(reopened.read_all()) == data
    reopened.close()


def test_batched_clean_is_delegated(tmp_path):
    inner = FileBasedWriteAheadLog(str(tmp_path / "w"), rolling_interval_s=1)
    with BatchedWriteAheadLog(inner) as log:
        for t in (0, 2_000, 4_000):
            log.write(b"%d" % t, t)
        log.clean(3_000, wait_for_completion=True)
        assert list(log.read_all()) == [b"2000", b"4000"]


def test_batched_many_concurrent_writers_lose_nothing(tmp_path):
    log = BatchedWriteAheadLog(FileBasedWriteAheadLog(str(tmp_path / "w"), fsync=False), max_batch_records=16)
    got: list[tuple[bytes, RecordHandle]] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        for i in range(250):
            record = b"%d-%d" % (n, i)
            handle = log.write(record, i)
            with lock:
                got.append((record, handle))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recovered = list(log.read_all())
    assert sorted(recovered) == sorted(r for r, _ in got)
    for record, handle in got[::97]:
        assert record in log.read_batch(handle)
    # Each writer's records come back in the order it wrote them.
    for n in range(8):
        mine = [r for r in recovered if r.startswith(b"%d-" % n)]
        assert mine == [b"%d-%d" % (n, i) for i in range(250)]
    assert all(len(batch) <= 16 for batch in map(log.read_batch, {h for _, h in got}))
    log.close()


def test_batched_bad_record_fails_only_its_writer(gated):
    log = BatchedWriteAheadLog(gated)
    with pytest.raises(TypeError):
        log.write("text", 1)  # type: ignore[arg-type]
    assert log.read_batch(log.write(bytearray(b"ok"), 2)) == [b"ok"]
    log.close()


def test_batched_read_all_skips_records_that_are_not_batches(tmp_path, caplog):
    inner = FileBasedWriteAheadLog(str(tmp_path / "w"))
    foreign = inner.write(b"\x93not a batch", 1)
    with BatchedWriteAheadLog(inner) as log:
        log.write(b"real", 2)
        assert list(log.read_all()) == [b"real"]
        with pytest.raises(CorruptRecordError):
            log.read_batch(foreign)
    assert "not a batch" in caplog.text


def test_aggregate_round_trip_and_rejects_foreign_data():
    assert deaggregate(aggregate([b"", b"a", b"\x00" * 1000])) == [b"", b"a", b"\x00" * 1000]
    for bad in (b"", b"\xc1", aggregate([]).replace(b"\x01", b"\x02", 1), b"\x92\x01\x91\xa1x"):
        with pytest.raises(ValueError):
            deaggregate(bad)


class _ThreadKiller(BaseException):
    """Not an Exception: what SystemExit or a KeyboardInterrupt delivered to the thread looks like."""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_batched_commit_thread_dying_fails_current_and_later_writers(gated):
    log = BatchedWriteAheadLog(gated)
    gated.gate.clear()
    gated.error = _ThreadKiller()  # type: ignore[assignment]
    threads, outcome = run_writers(log, [(b"in flight", 1)])
    assert gated.entered.wait(10)
    queued_threads, queued_outcome = run_writers(log, [(b"queued", 2)])
    wait_until(lambda: queued(log) == 1)
    gated.gate.set()
    for t in [*threads, *queued_threads]:
        t.join(10)
        assert not t.is_alive(), "a writer is still waiting for a dead commit thread"
    assert isinstance(outcome[b"in flight"], WriteAheadLogError)
    assert isinstance(outcome[b"in flight"].__cause__, _ThreadKiller)
    assert isinstance(queued_outcome[b"queued"], WriteAheadLogError)
    log._thread.join(10)
    with pytest.raises(WriteAheadLogError):
        log.write(b"later", 3)
    assert gated.closed
    log.close()
