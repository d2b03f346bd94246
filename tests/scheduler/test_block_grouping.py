"""Which of a batch's blocks one task reads (dstream/block_grouping.py): runs of consecutive blocks
kept in the same place, up to a size that shares a large batch over the cores."""

from __future__ import annotations

import pytest

from reliable_kafka.dstream.block_grouping import MIN_PARTITION_BYTES, group_blocks, target_partition_bytes

MIB = 1 << 20
HERE, THERE = ("host-a",), ("host-b",)


def as_lists(groups: list[range]) -> list[list[int]]:
    return [list(group) for group in groups]


def test_a_small_batch_from_one_place_is_one_partition() -> None:
    """Five 200 ms blocks of a 1 s batch: one task, not five."""
    assert as_lists(group_blocks([HERE] * 5, [10_000] * 5, MIN_PARTITION_BYTES)) == [[0, 1, 2, 3, 4]]


def test_runs_are_cut_where_the_place_changes_and_keep_block_order() -> None:
    """A receiver restarted on another host mid-batch: its blocks there are a partition of their
    own (their locality kept), and the blocks after it are not pulled ahead of them."""
    places = [HERE, HERE, THERE, THERE, HERE]
    assert as_lists(group_blocks(places, [1] * 5, MIN_PARTITION_BYTES)) == [[0, 1], [2, 3], [4]]


def test_a_run_is_cut_before_the_block_that_would_pass_the_target() -> None:
    sizes = [3 * MIB, 3 * MIB, 1 * MIB, 9 * MIB, 2 * MIB]
    assert as_lists(group_blocks([HERE] * 5, sizes, 6 * MIB)) == [[0, 1], [2], [3], [4]]


def test_target_zero_is_one_partition_per_block() -> None:
    """``spark.streaming.blockRDD.maxPartitionBytes=0``: Spark's BlockRDD, a block per partition."""
    assert as_lists(group_blocks([HERE] * 3, [1, 0, 1], 0)) == [[0], [1], [2]]


def test_a_block_of_unknown_size_is_a_partition_of_its_own() -> None:
    """Blocks reported by a version before sizes were (a metadata log recovered after an upgrade)."""
    assert as_lists(group_blocks([HERE] * 4, [1, None, 1, 1], MIN_PARTITION_BYTES)) == [[0], [1], [2, 3]]


def test_no_blocks_no_partitions() -> None:
    assert group_blocks([], [], MIN_PARTITION_BYTES) == []
    with pytest.raises(ValueError, match="2 places for 1 block sizes"):
        group_blocks([HERE, HERE], [1], MIN_PARTITION_BYTES)


@pytest.mark.parametrize(
    ("total", "parallelism", "max_bytes", "target"),
    [
        # A small batch: one task per place, however many cores.
        (1 * MIB, 16, 128 * MIB, MIN_PARTITION_BYTES),
        # A large one is shared over the cores...
        (400 * MIB, 16, 128 * MIB, 25 * MIB),
        # ... in partitions no larger than the setting.
        (400 * MIB, 2, 128 * MIB, 128 * MIB),
        (400 * MIB, 0, 128 * MIB, 128 * MIB),
        # 0: one partition per block.
        (400 * MIB, 2, 0, 0),
    ],
)
def test_the_target_shares_a_large_batch_over_the_cores(
    total: int, parallelism: int, max_bytes: int, target: int
) -> None:
    assert target_partition_bytes(total, parallelism, max_bytes) == target


def test_a_setting_below_the_smallest_share_still_bounds_partitions() -> None:
    assert target_partition_bytes(100 * MIB, 2, 1 * MIB) == 1 * MIB
