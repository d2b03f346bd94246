"""The receivers' clean threshold: held back for pending batches and for the WAL segments of the
blocks still needed."""

from __future__ import annotations

from reliable_kafka.scheduler.receiver_clean_threshold import receiver_clean_threshold_ms
from tests.support.scheduler_fakes import block_info
from wal import RecordHandle


def test_nothing_pending_or_needed_keeps_the_threshold() -> None:
    assert (
        receiver_clean_threshold_ms(
            10_000, oldest_pending_batch_ms=None, batch_duration_ms=1000, remember_ms=None, needed_blocks=[]
        )
        == 10_000
    )


def test_a_pending_batch_keeps_the_batch_before_it_and_what_its_stream_remembers() -> None:
    def threshold(remember_ms: int | None) -> int:
        return receiver_clean_threshold_ms(
            10_000,
            oldest_pending_batch_ms=8000,
            batch_duration_ms=1000,
            remember_ms=remember_ms,
            needed_blocks=[],
        )

    assert threshold(3000) == 8000 - 1000 - 3000
    assert threshold(None) == 8000 - 1000 - 1000  # nothing remembered: one batch


def test_a_needed_block_keeps_the_start_of_its_wal_segment() -> None:
    old = block_info(handle=RecordHandle("/checkpoint/receivedData/0/log-2500-3500", 0, 10))
    not_in_a_segment = block_info(handle=RecordHandle("/checkpoint/receivedData/0/tmp-file", 0, 10))
    in_memory = block_info()
    assert (
        receiver_clean_threshold_ms(
            10_000,
            oldest_pending_batch_ms=8000,
            batch_duration_ms=1000,
            remember_ms=1000,
            needed_blocks=[in_memory, not_in_a_segment, old],
        )
        == 2500
    )
