"""What each input stream put into a batch, as listeners see it (Spark's ``InputInfoTracker`` role).

Besides the record count, ``StreamInputInfo.metadata["blocks"]`` lists the batch's blocks as
plain data (id, records, whether the WAL holds it, and the metadata its receiver reported, e.g.
Kafka offset ranges), so that the status page can show a batch's blocks and offsets without
reaching into the tracker. Built once per batch on the job generator's thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
from reliable_kafka.scheduler.listener_events import StreamInputInfo

BLOCKS_KEY = "blocks"


def block_summary(info: ReceivedBlockInfo) -> dict[str, Any]:
    return {
        "id": info.block_id.name,
        "num_records": info.num_records,
        "in_wal": info.block_store_result.wal_record_handle is not None,
        "metadata": dict(info.metadata or {}),
    }


def input_infos_of_batch(
    num_records: Mapping[int, int], blocks: Mapping[int, Sequence[Any]]
) -> dict[int, StreamInputInfo]:
    """One ``StreamInputInfo`` per stream with records counted; blocks that are not
    ``ReceivedBlockInfo`` (test doubles) are left out of the metadata."""
    return {
        stream_id: StreamInputInfo(
            stream_id,
            count,
            {
                BLOCKS_KEY: [
                    block_summary(block)
                    for block in blocks.get(stream_id, ())
                    if isinstance(block, ReceivedBlockInfo)
                ]
            },
        )
        for stream_id, count in num_records.items()
    }
