"""Which of a batch's blocks one task reads: the partitions of a batch RDD.

Spark gives each block a partition of its own, so a batch has a task per block interval per
receiver (5 with 1 s batches and 200 ms blocks) and pays Spark's fixed cost per task (tens of
ms of scheduling, a Python worker's round trip) that many times, on the cores the receivers
leave free, whatever the batch holds. Here a partition holds a run of consecutive blocks that
are kept in the same place (the same preferred hosts), up to a size:

* consecutive blocks, in block order: the partitions' records, one after the other, are the
  batch's records in the order one partition per block gives (each Kafka partition's records
  stay in offset order), and a task reads its blocks one at a time, each through its own read
  chain (block store, holder, replica, write-ahead log, re-read), as a task of its own would;
* the same preferred hosts: the partition keeps its blocks' locality;
* up to :func:`target_partition_bytes`: a batch large enough to keep every core busy is split so
  that each core gets a share (as Spark SQL sizes file splits), never past the setting
  ``spark.streaming.blockRDD.maxPartitionBytes``; a small batch is one task per place.

A block of unknown size (reported by a version before sizes were) is a partition of its own.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

# The smallest share worth a core of its own: below it a second task costs more (Spark's fixed
# cost per task, 40-75 ms on 2 cores) than it saves. 4 MiB of the block format is ~35k records
# of 100 B: about 35 ms of work at 1 us of Python per record. Spark SQL sizes file splits the
# same way, min(maxPartitionBytes, max(openCostInBytes, bytes per core)), with this floor.
MIN_PARTITION_BYTES = 4 << 20


def target_partition_bytes(total_bytes: int, parallelism: int, max_bytes: int) -> int:
    """The size a partition is filled up to: the batch's bytes shared over ``parallelism`` cores,
    not less than :data:`MIN_PARTITION_BYTES` nor more than ``max_bytes``; 0 (one partition per
    block) when ``max_bytes`` is 0."""
    if max_bytes <= 0:
        return 0
    share = -(-total_bytes // max(1, parallelism))
    return min(max_bytes, max(MIN_PARTITION_BYTES, share))


def group_blocks(places: Sequence[Hashable], sizes: Sequence[int | None], target_bytes: int) -> list[range]:
    """The partitions of a batch as ranges of block indexes: runs of consecutive blocks with the
    same place, each run cut before the block that would take it past ``target_bytes`` (a block
    larger than that is alone). A block whose size is None, and every block when
    ``target_bytes`` is 0, is a partition of its own."""
    if len(places) != len(sizes):
        raise ValueError(f"{len(places)} places for {len(sizes)} block sizes")
    groups: list[range] = []
    start, filled = 0, 0
    for index, (place, size) in enumerate(zip(places, sizes, strict=True)):
        if index > start and (
            target_bytes <= 0
            or size is None
            or sizes[start] is None
            or place != places[start]
            or filled + size > target_bytes
        ):
            groups.append(range(start, index))
            start, filled = index, 0
        filled += size or 0
    if places:
        groups.append(range(start, len(places)))
    return groups
