"""The time before which receivers may delete blocks and WAL segments, kept back for the batches
still pending and the blocks not yet allocated."""

from __future__ import annotations

from collections.abc import Iterable

from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
from wal.segments import parse_segment_name, segment_basename


def receiver_clean_threshold_ms(
    clean_threshold_ms: int,
    *,
    oldest_pending_batch_ms: int | None,
    batch_duration_ms: int,
    remember_ms: int | None,
    needed_blocks: Iterable[ReceivedBlockInfo],
) -> int:
    """The time before which receivers may delete blocks and WAL segments.

    Receivers delete by store time (WAL segments ending, block manager entries stored, before
    the threshold), not by batch, so a pending batch P must pull the threshold back to before
    its blocks were stored. A block of P was normally stored within the batch before P and is
    remembered as long as its input stream is: hence ``P - batch_duration - remember``. Blocks
    allocated late (after a failed allocation, a restart, or returned to the queue) may be far
    older, so the threshold also goes back to the start of the WAL segment of every block of a
    pending batch and of every unallocated block: that keeps the segment and the block manager
    copy stored in it.
    """
    threshold = clean_threshold_ms
    if oldest_pending_batch_ms is not None:
        remember = remember_ms or batch_duration_ms
        threshold = min(threshold, oldest_pending_batch_ms - batch_duration_ms - remember)
    for info in needed_blocks:
        handle = info.block_store_result.wal_record_handle
        times = None if handle is None else parse_segment_name(segment_basename(handle.path))
        if times is not None:
            threshold = min(threshold, times[0])
    return threshold
