"""PartitionConsumer's out-of-range check on its own (issue 10, item 2): a committed offset
below the log start (retention) or past the log end starts at the reset offset and is
reported for repair; one inside the log is kept. The broker is a stand-in here (the log start
cannot be moved on the local 0.9 broker); test_out_of_range_offset.py covers the log end
against the real one."""

from __future__ import annotations

from typing import Any

import pytest

from reliable_kafka.kafka.client.shared_client import SharedFetchClient
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.receiver.partition_consumer import PartitionConsumer

TP = TopicAndPartition("t", 0)
LOG = (100, 200)  # log start, log end


class WatermarkOnly:
    def get_watermark_offsets(self, _partition: Any, timeout: float, cached: bool) -> tuple[int, int]:
        return LOG

    def close(self) -> None:
        pass


def consumer(
    start: int | None, reset: str, repaired: list[tuple[TopicAndPartition, int, int]]
) -> PartitionConsumer:
    client = SharedFetchClient(WatermarkOnly(), {}, packed_fetch=False, handoff_bytes=1)  # type: ignore[arg-type]
    partition_consumer = PartitionConsumer(
        TP,
        "thread-0",
        client,
        start_offset=start,
        offset_reset=reset,  # type: ignore[arg-type]
        sink=lambda *_: None,
        on_failure=lambda *_: None,
        on_out_of_range=lambda tp, old, new: repaired.append((tp, old, new)),
    )
    return partition_consumer


@pytest.mark.parametrize(
    ("start", "reset", "expected"),
    [(5, "smallest", 100), (5, "largest", 200), (500, "smallest", 100), (500, "largest", 200)],
)
def test_an_offset_outside_the_log_starts_at_the_reset_offset_and_is_reported(
    start: int, reset: str, expected: int
) -> None:
    repaired: list[tuple[TopicAndPartition, int, int]] = []
    c = consumer(start, reset, repaired)
    c._reset_if_out_of_range()
    assert c._start_at == expected
    assert c.next_offset == expected
    assert repaired == [(TP, start, expected)]


@pytest.mark.parametrize("start", [100, 150, 200, None])
def test_an_offset_inside_the_log_or_none_is_kept(start: int | None) -> None:
    repaired: list[tuple[TopicAndPartition, int, int]] = []
    c = consumer(start, "smallest", repaired)
    before = c._start_at
    c._reset_if_out_of_range()
    assert c._start_at == before
    assert repaired == []
