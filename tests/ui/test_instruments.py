"""The data path's instruments: Prometheus bucket semantics, timing of calls that raise, store sizes."""

from __future__ import annotations

import pytest

from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_manager import BlockManager
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util import instruments
from reliable_kafka.util.instruments import Histogram, StoreSizes


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
