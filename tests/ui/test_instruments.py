"""The data path's instruments: Prometheus bucket semantics, timing of calls that raise, store sizes."""

from __future__ import annotations

import pytest

from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_manager import BlockManager
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util import instruments
from reliable_kafka.util.instruments import Histogram, StoreSizes
from tests.support import wait_until


def test_buckets_are_cumulative_and_a_bound_holds_its_equal() -> None:
    histogram = Histogram((0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 1.0, 7.0):
        histogram.observe(value)
    snapshot = histogram.snapshot()
    assert snapshot.upper_bounds == (0.1, 1.0, float("inf"))
    assert snapshot.cumulative_counts == (2, 4, 5)
    assert snapshot.count == 5 and snapshot.sum == pytest.approx(8.65)


def test_timed_observes_a_call_that_raises() -> None:
    histogram = Histogram()

    def fail() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError):
        instruments.timed(histogram, fail)
    assert instruments.timed(histogram, lambda x: x + 1, 1) == 2
    assert histogram.snapshot().count == 2


def test_block_store_bytes_follow_puts_and_removes() -> None:
    sizes = StoreSizes()
    manager = BlockManager()
    sizes.track(manager)
    block = StreamBlockId(0, 1)
    manager.put(block, b"x" * 100, StorageLevel.MEMORY_ONLY)
    assert sizes.total_bytes() == 100
    manager.remove(block)
    assert sizes.total_bytes() == 0
    manager.close()


def test_receiver_processes_report_their_instruments_to_the_driver_over_the_tracker_socket() -> None:
    """What an executor's receiver task sends (plain data over the authenticated socket) is
    added to the driver's own figures in /metrics."""
    import msgpack

    from reliable_kafka.receiver.remote_tracker import RemoteTrackerEndpoint
    from reliable_kafka.rpc import new_secret
    from reliable_kafka.scheduler.tracker_server import ReceiverTrackerServer

    executor = instruments.InstrumentsSnapshot(
        wal_write=_snapshot_with(3, 0.004),
        offset_commit=_snapshot_with(2, 0.01),
        commit_failures=1,
        block_store_bytes=4096,
        blocks_served=7,
    )
    crossed = instruments.InstrumentsSnapshot.from_dict(msgpack.unpackb(msgpack.packb(executor.to_dict())))
    assert crossed == executor

    before = instruments.combined_snapshot()
    secret = new_secret()
    server = ReceiverTrackerServer(object(), secret).start()  # type: ignore[arg-type]
    try:
        endpoint = RemoteTrackerEndpoint.connect(*server.address, secret)
        try:
            endpoint.report_instruments("1/4242", executor.to_dict())
            wait_until(
                lambda: instruments.combined_snapshot().wal_write.count == before.wal_write.count + 3,
                what="the report",
            )
        finally:
            endpoint.close()
    finally:
        server.stop()
    after = instruments.combined_snapshot()
    assert after.offset_commit.count == before.offset_commit.count + 2
    assert after.commit_failures == before.commit_failures + 1
    assert after.block_store_bytes == before.block_store_bytes + 4096
    assert after.blocks_served == before.blocks_served + 7
    instruments.REMOTE_INSTRUMENTS.clear()


def test_a_malformed_instruments_report_is_refused() -> None:
    with pytest.raises(ValueError):
        instruments.InstrumentsSnapshot.from_dict(
            {"wal_write": {"bounds": [1.0], "counts": [1]}, "offset_commit": {}, "commit_failures": 0}
        )


def _snapshot_with(count: int, value: float) -> instruments.HistogramSnapshot:
    histogram = Histogram()
    for _ in range(count):
        histogram.observe(value)
    return histogram.snapshot()
