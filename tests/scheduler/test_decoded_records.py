"""The batch read chain's decoding (block_partition.decoded_records): a chunk of a block at a time,
from the columns when the decoders offer it, and every result the same as the decoder applied to
each record (issue 27 part 2)."""

from __future__ import annotations

from typing import Any

import pytest

from reliable_kafka.dstream.batch_rdd import SKIP_RECORD, _ReadBlocks
from reliable_kafka.dstream.block_partition import BlockPartition, decoded_records
from reliable_kafka.kafka.direct.message_and_metadata import utf8_decode_column, utf8_decoder
from reliable_kafka.kafka.kafka_utils import KafkaRecordDecoder
from reliable_kafka.kafka.receiver.decode_errors import RecordDecodeError
from reliable_kafka.storage.block_format import decode_block, encode_block, encode_chunks, pack_chunk


def chunked(*columns: tuple[int, list[bytes | None], list[bytes | None], int]) -> bytes:
    """A chunk-layout block: per chunk (partition, keys, values, first offset)."""
    chunks = [
        pack_chunk("events", partition, keys, values, list(range(first, first + len(keys))))
        for partition, keys, values, first in columns
    ]
    return encode_chunks(chunks)


def one_by_one(data: bytes, decoder: Any) -> list[Any]:
    """What the read chain produced before: the decoder applied to each row, skips left out."""
    return [item for item in map(decoder, decode_block(data)) if item is not SKIP_RECORD]


MIXED = chunked(
    (0, [None] * 3, [b"a", b"b", b"c"], 0),
    (1, [b"k1", None, b"k3"], [b"x", None, "é".encode()], 7),
    (0, [b"q", b"r"], [b"", b"s"], 3),
)


@pytest.mark.parametrize(
    "decoder",
    [
        KafkaRecordDecoder(),
        KafkaRecordDecoder(lambda k: k, lambda v: v),
        KafkaRecordDecoder(messageHandler=lambda m: (m.topic, m.partition, m.offset, m.key, m.message)),
        lambda record: record[4],
    ],
    ids=["utf8 columns", "own decoders", "messageHandler", "plain function"],
)
def test_the_same_items_as_the_decoder_record_by_record(decoder: Any) -> None:
    assert list(decoded_records(MIXED, decoder, SKIP_RECORD)) == one_by_one(MIXED, decoder)


def test_default_decoders_give_key_value_pairs_in_order() -> None:
    assert list(decoded_records(MIXED, KafkaRecordDecoder(), SKIP_RECORD)) == [
        (None, "a"),
        (None, "b"),
        (None, "c"),
        ("k1", "x"),
        (None, None),
        ("k3", "é"),
        ("q", ""),
        ("r", "s"),
    ]


def test_row_layout_blocks_decode_in_slices_with_the_same_result() -> None:
    rows = [(None, f"v{n}".encode(), "events", n % 3, n) for n in range(10_000)]
    data = encode_block(rows)
    decoder = KafkaRecordDecoder()
    assert list(decoded_records(data, decoder, SKIP_RECORD)) == [(None, f"v{n}") for n in range(10_000)]


BAD_UTF8 = chunked((2, [None, None, None], [b"ok", b"\xff\xfe", b"fine"], 40))


def test_a_bad_value_fails_the_batch_naming_its_record() -> None:
    with pytest.raises(RecordDecodeError, match="events/2 offset 41"):
        list(decoded_records(BAD_UTF8, KafkaRecordDecoder(), SKIP_RECORD))


def test_a_bad_value_is_skipped_and_counted_once(caplog: pytest.LogCaptureFixture) -> None:
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def add(self, n: int) -> None:
            self.n += n

    class Counters:
        skipped = Counter()
        dead_lettered = Counter()

    decoder = KafkaRecordDecoder(decode_errors="skip", counters=Counters())  # type: ignore[arg-type]
    assert list(decoded_records(BAD_UTF8, decoder, SKIP_RECORD)) == [(None, "ok"), (None, "fine")]
    assert Counters.skipped.n == 1
    [line] = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert line.startswith("record at events/2 offset 41 skipped: UnicodeDecodeError(")


def test_decoders_without_a_column_version_see_each_record() -> None:
    seen: list[bytes | None] = []

    def value_decoder(value: bytes | None) -> Any:
        seen.append(value)
        return value

    list(decoded_records(MIXED, KafkaRecordDecoder(valueDecoder=value_decoder), SKIP_RECORD))
    assert seen == [b"a", b"b", b"c", b"x", None, "é".encode(), b"", b"s"]


def test_a_handler_returning_skip_leaves_the_record_out() -> None:
    decoder = KafkaRecordDecoder(messageHandler=lambda m: SKIP_RECORD if m.offset % 2 else m.offset)
    assert list(decoded_records(MIXED, decoder, SKIP_RECORD)) == [0, 2, 8, 4]


def test_utf8_column_is_utf8_decoder_over_the_column() -> None:
    assert utf8_decoder.decode_column is utf8_decode_column  # type: ignore[attr-defined]
    for column in [(None, None), (b"a", "é".encode()), (b"a", None, b"b"), ()]:
        assert list(utf8_decode_column(column)) == [utf8_decoder(v) for v in column]
    with pytest.raises(UnicodeDecodeError):
        list(utf8_decode_column((b"a", b"\xff")))


def test_the_read_chain_reads_then_decodes() -> None:
    descriptor = BlockPartition.encode_blocks([BlockPartition("input-0-1", MIXED)])
    assert list(_ReadBlocks(None)(0, [descriptor])) == decode_block(MIXED)
    assert list(_ReadBlocks(KafkaRecordDecoder())(0, [descriptor])) == one_by_one(MIXED, KafkaRecordDecoder())
