"""The block format: magic + one msgpack array of records or of packed chunks; both decode to tuples."""

from __future__ import annotations

import msgpack
import pytest

from reliable_kafka.storage import (
    BLOCK_MAGIC,
    CHUNKED_BLOCK_MAGIC,
    BlockFormatError,
    PackedChunk,
    decode_block,
    encode_block,
    encode_chunks,
    pack_chunk,
)


def test_kafka_records_round_trip_as_tuples() -> None:
    records = [(b"key", b"value" * 20, "events", 3, 1000 + i) for i in range(100)] + [
        (None, b"", "events", 0, 0)
    ]
    assert decode_block(encode_block(records)) == records


def test_layout_is_magic_then_a_plain_msgpack_array() -> None:
    data = encode_block(["a", b"b", 1, None, {"k": [1, 2]}])
    assert data[:4] == BLOCK_MAGIC
    # Any msgpack reader can read it: the layout documented in block_format's docstring.
    assert msgpack.unpackb(data[4:], raw=False) == ["a", b"b", 1, None, {"k": [1, 2]}]
    assert decode_block(data) == ["a", b"b", 1, None, {"k": (1, 2)}]


def test_unencodable_records_raise_type_error() -> None:
    with pytest.raises(TypeError):
        encode_block([object()])


@pytest.mark.parametrize(
    "data",
    [b"", b"\x80\x04pickle", BLOCK_MAGIC + b"\x93\x01", BLOCK_MAGIC + msgpack.packb({"not": "an array"})],
)
def test_bytes_that_are_not_a_block_raise_block_format_error(data: bytes) -> None:
    with pytest.raises(BlockFormatError):
        decode_block(data)


def chunk_of(partition: int, offsets: range, topic: str = "events") -> PackedChunk:
    keys = [None if i % 3 == 0 else f"k{i}".encode() for i in offsets]
    return pack_chunk(topic, partition, keys, [f"v{i}".encode() for i in offsets], list(offsets))


def test_chunks_decode_to_the_same_rows_in_chunk_order() -> None:
    chunks = [chunk_of(0, range(0, 5)), chunk_of(1, range(40, 42)), chunk_of(0, range(5, 7), topic="t2")]
    data = encode_chunks(chunks)
    assert data[:4] == CHUNKED_BLOCK_MAGIC
    assert decode_block(data) == [
        (None, b"v0", "events", 0, 0),
        (b"k1", b"v1", "events", 0, 1),
        (b"k2", b"v2", "events", 0, 2),
        (None, b"v3", "events", 0, 3),
        (b"k4", b"v4", "events", 0, 4),
        (b"k40", b"v40", "events", 1, 40),
        (b"k41", b"v41", "events", 1, 41),
        (b"k5", b"v5", "t2", 0, 5),
        (None, b"v6", "t2", 0, 6),
    ]
    assert [c.num_records for c in chunks] == [5, 2, 2]


@pytest.mark.parametrize("count", [0, 1, 15, 16, 65535, 65536])
def test_every_msgpack_array_header_size_is_written_as_the_spec_says(count: int) -> None:
    # fixarray below 16, array 16 below 2**16, array 32 above: any msgpack reader agrees.
    chunk = chunk_of(0, range(1))
    data = encode_chunks([chunk] * count)
    assert len(msgpack.unpackb(data[4:])) == count
    assert len(decode_block(data)) == count


def test_a_chunk_with_columns_of_different_lengths_is_refused() -> None:
    with pytest.raises(ValueError, match="2 keys, 1 values, 1 offsets"):
        pack_chunk("t", 0, [None, None], [b"v"], [0])


@pytest.mark.parametrize(
    "body",
    [
        [["t", 0, [None], [b"v"]]],  # four fields
        [["t", 0, [None, None], [b"v"], [1]]],  # columns of different lengths
        [[0, "t", [None], [b"v"], [1]]],  # topic and partition swapped
        [["t", 0, None, [b"v"], [1]]],  # a column that is not an array
    ],
)
def test_malformed_chunks_raise_block_format_error(body: list) -> None:
    with pytest.raises(BlockFormatError, match="chunk 0"):
        decode_block(CHUNKED_BLOCK_MAGIC + msgpack.packb(body, use_bin_type=True))


def test_a_truncated_chunk_block_raises_block_format_error() -> None:
    data = encode_chunks([chunk_of(0, range(10))])
    with pytest.raises(BlockFormatError):
        decode_block(data[:-3])
