"""``ChunkRangeReader.read`` against a scripted packed fetch: what its fetches give the shared range
loop (chunks cut at the range's end with their metadata columns in step, the range's end reached,
no more asked than the range misses). The loop's loss and refusal rules are tested once, through
``PackedRangeReader`` (test_packed_range_reader_rules.py)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from reliable_kafka.kafka.client.chunk_range_reader import ChunkRangeReader
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.packed_fetch import FetchedBatch, RecordMetadata
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.storage.block_format import pack_chunk
from tests.support.range_fakes import ScriptedConsumer, alice_refusals, eof


def fetched(offsets: list[int], *errors: KafkaError) -> FetchedBatch:
    """Records at ``offsets`` (value: the offset) and ``errors``, as PackedFetch.fetch gives them."""
    if not offsets:
        return FetchedBatch(None, -1, -1, list(errors))
    values = [str(offset).encode() for offset in offsets]
    chunk = pack_chunk("t", 0, [None] * len(offsets), values, offsets)
    return FetchedBatch(chunk, offsets[0], offsets[-1], list(errors))


def metadata_of(batch: FetchedBatch) -> RecordMetadata:
    """Each record's timestamp its offset, a type of Kafka's per parity, a header naming it."""
    if batch.chunk is None:
        return RecordMetadata([], [], [])
    offsets = range(batch.first_offset, batch.last_offset + 1)
    return RecordMetadata(
        list(offsets), [o % 2 for o in offsets], [[("o", str(o).encode())] for o in offsets]
    )


class ScriptedFetch:
    def __init__(self, *batches: FetchedBatch) -> None:
        self._batches = list(batches)
        self.asked: list[int] = []

    def fetch(self, max_messages: int, _timeout_s: float) -> FetchedBatch:
        self.asked.append(max_messages)
        return self._batches.pop(0) if self._batches else fetched([])

    def fetch_with_metadata(self, max_messages: int, timeout_s: float) -> tuple[FetchedBatch, RecordMetadata]:
        batch = self.fetch(max_messages, timeout_s)
        return batch, metadata_of(batch)

    def serve_events(self) -> list[KafkaError]:
        return []


def reader(*batches: FetchedBatch) -> ChunkRangeReader:
    refusals = alice_refusals()
    return ChunkRangeReader(ScriptedConsumer(), refusals, ScriptedFetch(*batches), TopicAndPartition("t", 0))  # type: ignore[arg-type]


def offsets_read(chunks: ChunkRangeReader, wanted: OffsetRange, timeout_s: float = 5) -> list[int]:
    return [offset for chunk in chunks.read(wanted, timeout_s, 100) for offset in chunk[4]]


def test_a_range_ending_at_the_log_end_is_complete_despite_the_eof_in_its_last_fetch() -> None:
    assert offsets_read(reader(fetched([3, 4], eof())), OffsetRange("t", 0, 3, 5)) == [3, 4]


def test_records_past_the_range_in_the_same_fetch_are_cut_off_with_their_metadata() -> None:
    # A gap in the log (compaction) lets a fetch of no more than the range's count pass its end.
    chunks = list(
        reader(fetched([3]), fetched([5, 6, 7])).read(OffsetRange("t", 0, 3, 7), 5, 100, with_metadata=True)
    )
    assert [chunk[4] for chunk in chunks] == [(3,), (5, 6)]
    assert chunks[1] == (
        "t",
        0,
        (None, None),
        (b"5", b"6"),
        (5, 6),
        (5, 6),
        ("LogAppendTime", "CreateTime"),
        ([("o", b"5")], [("o", b"6")]),
    )


def test_a_fetch_asks_for_no_more_than_the_range_still_misses() -> None:
    scripted = reader(fetched([3, 4]), fetched([5]))
    assert offsets_read(scripted, OffsetRange("t", 0, 3, 6)) == [3, 4, 5]
    assert scripted._fetch.asked == [3, 1]  # type: ignore[attr-defined]


def test_a_reader_of_one_partition_refuses_another() -> None:
    with pytest.raises(ValueError, match=r"asked for t \[1\]"):
        offsets_read(reader(), OffsetRange("t", 1, 3, 6))
